"""TRIALS=auto end to end: real stack, real load, rounds until precise or out of budget."""

import re
from pathlib import Path

import pytest

from bench.core import defaults
from tests.integration.conftest import run_bench, trial_records

pytestmark = pytest.mark.integration


def test_trials_auto_runs_rounds_and_says_which_points_reached_the_target(tmp_path: Path) -> None:
    """granian /plaintext c10, 1 s per run, a 1-minute budget: at least 3 trials, every record
    carries trials_auto, the harness says why it stopped, the summary which points reached
    ±5 %; the budget bounds the rounds (60 s of 1-second runs: at most 60 of the 100 trials
    TRIALS=auto allows; no wall-clock bound, which a slow CI machine would fail)."""
    results = tmp_path / "results"
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
    assert len(trials) <= 60 < defaults.AUTO_MAX_TRIALS


def test_trials_auto_races_two_servers_to_a_verdict(tmp_path: Path) -> None:
    """granian and gunicorn-sync on /plaintext c10, 1 s per run, a 2-minute budget: the race
    runs at least 3 rounds, shows its standings after each, ends its output with the point's
    verdict (decided, or undecided with the command that would decide), and the summary
    repeats that verdict; every record carries the race's margin and looks."""
    results = tmp_path / "results"
    proc = run_bench(
        results,
        server="granian,gunicorn-sync",
        scenario="plaintext",
        concurrency=10,
        duration=1,
        warmup=0,
        trials="auto",
        trials_budget=2,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    records = trial_records(results)
    assert {r["server"] for r in records} == {"granian", "gunicorn-sync"}
    assert all(r["metadata"]["trials_auto"]["margin"] == 0.05 for r in records)
    assert all(r["metadata"]["trials_auto"]["max_looks"] >= 3 for r in records)
    assert "TRIALS=auto round 3: plaintext c10:" in proc.stderr
    verdict = re.search(
        r"^plaintext c10: (decided|undecided) in (\d+) round\(s\).*$", proc.stderr, re.M
    )
    assert verdict is not None, proc.stderr[-2000:]
    assert int(verdict.group(2)) >= 3
    stop = re.search(r"race stopped \((\w+)\)", proc.stderr)
    assert stop is not None and (stop.group(1) == "decided") == (verdict.group(1) == "decided")
    if verdict.group(1) == "undecided":
        assert "make bench SERVER=" in proc.stderr
    summary = (results / "summary.md").read_text()
    assert verdict.group(0).split(", ")[0] in summary
