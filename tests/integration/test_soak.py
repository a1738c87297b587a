"""make soak on the real stack: a 20 s soak of granian writes an RSS series with one sample
of every process every 2 s."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.core.registry import ROOT
from bench.observe import soak
from tests.integration.conftest import report_text

pytestmark = pytest.mark.integration


def test_short_soak_writes_every_sample_of_every_process(tmp_path: Path) -> None:
    """granian (a main process and 2 workers) at 50 req/s for 20 s, RSS every 2 s: 10
    samples per process, the leader among them, a slope with its interval, one minute of
    responses/s."""
    results = tmp_path / "results"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench",
            "soak",
            "--server=granian",
            "--workers=2",
            "--duration=20",
            "--interval=2",
            "--rate=50",
            "--warmup=1",
            f"--results={results}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    [path] = results.glob("records/*.json")
    rec = json.loads(path.read_text())
    series = rec["series"]
    expected = soak.samples_in(20, 2)
    assert expected == 10
    assert len(series["t_s"]) == expected
    assert len(series["rss_mb"]) == 3 and series["leader_pid"] in series["rss_mb"]
    assert all(
        len(values) == expected and None not in values for values in series["rss_mb"].values()
    )
    assert all(value > 0 for values in series["rss_mb"].values() for value in values)
    slope = series["rss_slope_mb_per_h"]
    assert slope["ci_low"] <= slope["slope"] <= slope["ci_high"]
    [minute] = series["minutes"]
    assert minute["minute"] == 1 and minute["responses_per_s"] > 0
    assert "## Soak: memory over time" in report_text(results)
