"""make capacity on a real server whose capacity is known by construction."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.registry import ROOT
from bench.scenario import SLEEP_MS

pytestmark = pytest.mark.integration


def test_capacity_of_one_sync_worker_sleeping_10_ms(tmp_path: Path) -> None:
    """One gunicorn sync worker on /sleep?ms=10 serves at most 1000/10 = 100 req/s: the search
    (p99 <= 100 ms) finds a capacity within ±15 % of it, every step is a record with its
    verdict, the steps past capacity (120 %, 150 %) fail the objective, and the summary has
    the capacity table and the knee plot."""
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
    records = [json.loads(p.read_text()) for p in (results / "records").glob("*.json")]
    assert records and all(r["status"] == "ok" and r["load_tool"] == "oha" for r in records)
    steps = sorted(records, key=lambda r: r["metadata"]["capacity"]["step"])
    found = [s["metadata"]["capacity"].get("result_rps") for s in steps]
    (capacity,) = [f for f in found if f is not None]
    by_construction = 1000 / SLEEP_MS
    assert abs(capacity - by_construction) <= 0.15 * by_construction, capacity
    # Past capacity the server cannot keep up: the objective fails, the served rate is capped.
    past = [s for s in steps if s["metadata"]["capacity"]["phase"] == "past"]
    assert len(past) == 2 and not any(s["metadata"]["capacity"]["passed"] for s in past)
    assert all(s["achieved_rps"] < 1.1 * by_construction for s in past)
    assert all(s["latency_ms"]["p99"] > 100 for s in past)
    summary = (results / "summary.md").read_text()
    assert "### Capacity at p99 ≤ 100 ms: sleep" in summary
    assert (results / "plots" / "knee-sleep-100.png").stat().st_size > 10_000
