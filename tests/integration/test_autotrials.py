"""TRIALS=auto end to end: real stack, real load, rounds until precise or out of budget."""

import re
import time
from pathlib import Path

import pytest

from tests.integration.conftest import run_bench, trial_records

pytestmark = pytest.mark.integration


def test_trials_auto_runs_rounds_and_says_which_points_reached_the_target(tmp_path: Path) -> None:
    """granian /plaintext c10, 1 s per run, a 1-minute budget: at least 3 trials, every record
    carries trials_auto, the harness says why it stopped, the summary which points reached
    ±5 %; the rounds end within the budget plus one round's overrun and start-up."""
    results = tmp_path / "results"
    started = time.monotonic()
    proc = run_bench(
        results,
        server="granian",
        scenario="plaintext",
        concurrency=10,
        duration=1,
        warmup=0,
        trials="auto",
        trials_budget=1,
    )
    elapsed = time.monotonic() - started
    assert proc.returncode == 0, proc.stderr[-2000:]
    records = trial_records(results)
    trials = sorted(r["trial"] for r in records)
    assert trials == list(range(1, len(trials) + 1)) and len(trials) >= 3
    assert all(r["metadata"]["trials_auto"]["budget_s"] == 60 for r in records)
    stop = re.search(r"TRIALS=auto: stopped on (\w+) after (\d+) trial", proc.stderr)
    assert stop is not None and stop.group(1) in ("precision", "budget")
    assert int(stop.group(2)) == len(trials)
    summary = (results / "summary.md").read_text()
    reached = "1 of 1 points reached the target" in summary
    assert reached == (stop.group(1) == "precision"), summary
    assert elapsed < 60 + 120  # budget + start-up and one server start's worth
