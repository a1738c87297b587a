"""The foreign-load guard on the real stack: a CPU burner this test starts (and stops by its
PID) beside a short run makes the run "foreign load" in the summary, kept and repeated."""

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.core.registry import ROOT
from bench.host.state import LOCK_ENV
from tests.integration.conftest import bench_command

pytestmark = pytest.mark.integration
BURN = "import time\nend = time.time() + 300\nwhile time.time() < end: pass\n"


@pytest.fixture
def burner() -> Iterator[subprocess.Popen]:
    """A busy loop on one CPU, outside the harness's process tree (it ends by itself after
    five minutes should the test die)."""
    proc = subprocess.Popen([sys.executable, "-c", BURN])
    yield proc
    proc.kill()
    proc.wait()


def test_a_burner_beside_a_run_shows_as_foreign_load(
    tmp_path: Path, burner: subprocess.Popen
) -> None:
    """Every run measured beside the burner is marked (foreign_load, its CPU, python among
    the top processes) and measured once more; the summary says "Foreign load"."""
    results = tmp_path / "results"
    command = bench_command(
        results,
        server="nginx-static",
        scenario="plaintext",
        concurrency=2,
        duration=2,
        warmup=0,
        trials=1,
    )
    done = subprocess.run(
        command,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, LOCK_ENV: str(tmp_path / "machine.lock")},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "this machine is busy" in done.stderr
    records = [json.loads(p.read_text()) for p in (results / "records").glob("*.json")]
    marked = [r for r in records if r["foreign_load"]]
    repeats = [r for r in records if r["metadata"].get("repeat_of")]
    # the warm-up run (marked, never repeated: it is not analysed) and the trial's run,
    # marked and repeated once (the repeat marked too, not repeated again)
    assert len(records) == 3 and len(marked) == 3 and len(repeats) == 1
    assert all(r["foreign_cpu_percent"] > 10 for r in marked)
    assert all(any(n.startswith("python") for n, _ in r["foreign_top"]) for r in marked)
    summary = (results / "summary.md").read_text()
    assert "**Foreign load** (3 run(s))" in summary and "python" in summary
