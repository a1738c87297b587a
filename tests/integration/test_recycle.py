"""RECYCLE= on the real stack: Gunicorn's own --max-requests replaces its workers during the
window, the record counts the workers started, and the run is not voided by the watchdog."""

from pathlib import Path

import pytest

from tests.integration.conftest import run_bench, trial_records

pytestmark = pytest.mark.integration


def test_workers_recycle_and_are_counted(tmp_path: Path) -> None:
    """gunicorn-sync (2 workers) at 200 req/s for 6 s with max requests 200 (jitter 20): about
    1,200 requests, so each worker is replaced at least twice; the argv carries the flags."""
    results = tmp_path / "results"
    done = run_bench(
        results,
        server="gunicorn-sync",
        scenario="db",
        load="oha",
        rate=200,
        duration=6,
        warmup=0,
        trials=1,
        workers=2,
        recycle=200,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    [rec] = trial_records(results)  # the warm-up start's record left out
    assert rec["status"] == "ok", rec["reason"]
    assert rec["knobs"]["max_requests"] == 200 and rec["knobs"]["max_requests_jitter"] == 20
    argv = rec["metadata"]["argv"]
    assert argv[argv.index("--max-requests") + 1] == "200"
    recycles = rec["recycles"]
    assert recycles["workers_at_start"] == 2
    assert recycles["workers_started"] >= 4
