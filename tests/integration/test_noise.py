"""make noise end to end: the smallest nested design on the real stack, records like every
run's, the analysis on stdout, in the summary and in details/noise.md."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.core.registry import ROOT

pytestmark = pytest.mark.integration


def test_the_smallest_design_runs_records_and_reports(tmp_path: Path) -> None:
    """granian /db c=10, 2 rounds × 2 starts × 2 runs of 1 s and a warm-up start: 9 ok
    records marked with their place in the design, each with the workers' CPU seconds; the
    variance components and the A/A line printed, the summary's section and details/noise.md
    written, the runs kept out of the speed tables."""
    results = tmp_path / "results"
    argv = [
        sys.executable,
        "-m",
        "bench",
        "noise",
        "--server=granian",
        "--concurrency=10",
        "--duration=1",
        "--warmup=0",
        "--rounds=2",
        "--starts=2",
        "--runs=2",
        f"--results={results}",
    ]
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    records = [json.loads(p.read_text()) for p in sorted((results / "records").glob("*.json"))]
    assert len(records) == 9 and all(r["status"] == "ok" for r in records)
    places = sorted(
        (r["metadata"]["noise"]["round"], r["metadata"]["noise"]["start"]) for r in records
    )
    assert places == [(0, 1), (1, 1), (1, 1), (1, 2), (1, 2), (2, 1), (2, 1), (2, 2), (2, 2)]
    assert len({r["metadata"]["noise"]["id"] for r in records}) == 1
    assert [r["metadata"]["noise"]["warmup"] for r in records].count(True) == 1
    for rec in records:
        workers = rec["resources"]["worker_cpu_s"]
        assert len(workers) >= rec["knobs"]["workers"] >= 1, workers
        assert sum(workers.values()) > 0
    assert "This machine's noise" in proc.stdout
    assert "between runs of one start" in proc.stdout and "A/A race" in proc.stdout
    summary = (results / "summary.md").read_text()
    assert "## This machine's noise" in summary and "details/noise.md" in summary
    details = (results / "details" / "noise.md").read_text()
    assert "| round | start |" in details and "runs within a start" in details
    assert not list((results / "details").glob("speed-*.md"))  # not a bench point
