"""LIFECYCLE=reload on the real stack: Gunicorn's SIGHUP sent in the middle of an open-loop
window, the record's failed count equal to what oha itself reported, and a server without a
graceful reload recorded as such."""

import gzip
import json
from pathlib import Path

import pytest

from bench.load.oha import parse_oha
from bench.observe import lifecycle
from tests.integration.conftest import run_bench

pytestmark = pytest.mark.integration


def test_reload_at_the_planned_second_and_failed_as_the_tool_saw(tmp_path: Path) -> None:
    """gunicorn-sync at 200 req/s for 6 s: HUP at 3 s (never before: a timer cannot fire
    early; inside the window), handled once by the master, and the record's failed requests
    are oha's own failures by class from its JSON. waitress: unsupported, with the reason."""
    results = tmp_path / "results"
    done = run_bench(
        results,
        server="gunicorn-sync,waitress",
        scenario="db",
        load="oha",
        rate=200,
        duration=6,
        warmup=0,
        trials=1,
        lifecycle="reload",
    )
    assert done.returncode == 0, done.stderr[-2000:]
    records = {
        r["server"]: r for r in (json.loads(p.read_text()) for p in results.glob("records/*"))
    }
    waitress = records["waitress"]
    assert waitress["status"] == "unsupported"
    assert waitress["reason"].startswith("reload not supported by the server: waitress")

    rec = records["gunicorn-sync"]
    assert rec["status"] == "ok", rec["reason"]
    life = rec["lifecycle"]
    assert life["event"] == "reload" and life["signal"] == "SIGHUP"
    assert life["planned_at_s"] == 3.0
    assert 3.0 <= life["at_s"] < 6.0
    raw = {Path(f).name.split(".", 1)[1]: results / f for f in rec["raw_files"]}
    oha = parse_oha(raw["oha.json"].read_text(), offered_rps=200)
    seen = sum(oha.errors.values())  # connect read write timeout other non_2xx
    unsent = rec["errors"]["unsent"]
    assert life["failed"] == seen + unsent
    assert life["failed"] == sum(life["failed_by_class"].values())
    rows = lifecycle.parse_requests(gzip.decompress(raw["oha.requests.csv.gz"].read_bytes()))
    assert len(rows) == oha.responses == rec["requests"]
    # The master handled exactly one HUP (the harness's) and booted new workers after it.
    run_dir = Path(done.stderr.split("run directory ", 1)[1].split(",", 1)[0])
    log = (run_dir / "gunicorn-sync-t1.log").read_text()
    assert log.count("Handling signal: hup") == 1
    assert "Booting worker" in log.split("Handling signal: hup", 1)[1]
