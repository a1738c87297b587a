"""TRIALS=auto's stopping rule (bench.report.precision) over fake measurement sequences, and
the harness's rounds (bench.harness.run) in-process with a fake site and load tool."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from bench.core import plan
from bench.harness.recorder import Recorder
from bench.harness.run import Harness, execute
from bench.host.placement import cpu_placement
from bench.report import precision
from tests.fakes import FakeSite, FakeTool, result

SETTINGS = plan.Precision(target=0.05, budget_s=300, min_trials=3, max_trials=100)


def _simulate(
    sequence: Sequence[float], round_s: float = 10.0, settings: plan.Precision = SETTINGS
) -> tuple[int, str]:
    """Feed one point's trials a round at a time, as the harness does: (trials run, why)."""
    for done in range(1, len(sequence) + 1):
        elapsed = done * round_s
        stop = precision.next_round(done, {"p": sequence[:done]}, elapsed, round_s, settings)
        if stop is not None:
            return done, stop
    raise AssertionError("the sequence ran out before the rule stopped")


def test_half_width_is_the_t_interval_on_log_values() -> None:
    """exp(t(0.975, n-1) · sd(ln)/√n) − 1: 3 trials of 100, 110, 121 (ln steps of 0.0953)."""
    values = [100.0, 110.0, 121.0]
    sem = np.std(np.log(values), ddof=1) / math.sqrt(3)
    assert precision.half_width(values) == pytest.approx(math.expm1(4.302653 * sem), rel=1e-5)
    assert precision.half_width([100.0]) is None


def test_shrinking_spread_stops_early_on_precision() -> None:
    """Noisy first trials, then the machine settles: the rule stops once the interval is
    within ±5 %, long before the budget (30 rounds of 10 s)."""
    rng = np.random.default_rng(4)
    noisy = list(1000 * np.exp(rng.normal(0, 0.15, 3)))
    settled = list(1000 * np.exp(rng.normal(0, 0.005, 40)))
    done, why = _simulate(noisy + settled)
    assert why == "precision" and 3 < done < 30
    assert precision.half_width((noisy + settled)[: done - 1]) > 0.05  # not one round early


def test_a_point_that_never_gets_precise_stops_at_the_budget() -> None:
    """Trials alternating ±40 % never give a ±5 % interval: the rule stops when the next
    round of 10 s would end past the 300 s budget, i.e. after 30 rounds (300 s exactly)."""
    done, why = _simulate([600.0, 1400.0] * 100)
    assert (done, why) == (30, "budget")


def test_never_stops_before_three_trials() -> None:
    """Identical trials (a zero-width interval) and a budget already spent: still 3 trials."""
    assert _simulate([500.0] * 10, round_s=1_000.0) == (3, "precision")
    tight = plan.Precision(target=0.05, budget_s=1, min_trials=3)
    assert _simulate([600.0, 1400.0] * 10, round_s=100.0, settings=tight) == (3, "budget")
    for done in (1, 2):
        assert precision.next_round(done, {"p": [500.0] * done}, 1e9, 1e9, SETTINGS) is None


def test_every_point_must_reach_the_target() -> None:
    """One precise point and one noisy one: go on; the trial cap stops it."""
    figures = {"a": [500.0] * 5, "b": [600.0, 1400.0, 600.0, 1400.0, 600.0]}
    assert precision.next_round(5, figures, 10.0, 1.0, SETTINGS) is None
    capped = plan.Precision(max_trials=5)
    assert precision.next_round(5, figures, 10.0, 1.0, capped) == "limit"


def _execute(tmp_path: Path, tool: FakeTool, monkeypatch: pytest.MonkeyPatch, **kw) -> list[dict]:
    state = tmp_path / "state"
    state.mkdir()
    monkeypatch.setattr("bench.harness.run.state_base", lambda: state)
    # read at the start, then once after each round from the third: a round takes a minute
    clock = iter([0, *range(180, 10_000, 60)])
    monkeypatch.setattr("bench.harness.run.clock", lambda: float(next(clock)))

    def harness(first, arms, table, run_dir, progress) -> Harness:
        recorder = Recorder({"hostname": "test"}, cpu_placement(False), tool, progress)
        return Harness(FakeSite(), tool, recorder, table, run_dir, progress)

    options = plan.Options(
        servers=("granian",),  # several servers race instead (tests/bench/test_racing.py)
        scenarios=("db",),
        concurrency=(10,),
        duration_s=1,
        warmup_s=0,
        trials=3,
        arch="amd64",
        results=tmp_path / "results",
        overrides={},
        load_threads=1,
        seed=3,
        **kw,
    )
    assert execute(options, harness=harness) == 0
    paths = sorted((tmp_path / "results" / "records").glob("*.json"))
    return [json.loads(p.read_text()) for p in paths]


def test_harness_stops_after_three_rounds_when_precise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Identical fake trials: 3 rounds of one server, no more; each record says trials_auto
    and the summary says the point reached the target."""
    records = _execute(tmp_path, FakeTool(), monkeypatch, precision=SETTINGS)
    # trial 0: the server's warm-up start, recorded and never counted
    assert sorted((r["server"], r["trial"]) for r in records) == [
        ("granian", t) for t in (0, 1, 2, 3)
    ]
    assert all(r["metadata"].get("warmup_start") is (r["trial"] == 0 or None) for r in records)
    assert all(r["metadata"]["trials_auto"]["target"] == 0.05 for r in records)
    summary = (tmp_path / "results" / "summary.md").read_text()
    assert "1 of 1 points reached the target" in summary


def test_harness_adds_rounds_until_the_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Trials alternating 250 / 750 req/s never get precise: rounds go on while one more
    fits in a 10-minute budget (the fake clock: a minute per round), then the summary names
    the points that missed."""
    script = [result(requests=r) for _ in range(100) for r in (500, 1500)]
    settings = plan.Precision(budget_s=600)
    records = _execute(tmp_path, FakeTool(script=script), monkeypatch, precision=settings)
    trials = max(r["trial"] for r in records)
    assert trials == 10  # 10 rounds of a minute fill the budget; an 11th would end past it
    summary = (tmp_path / "results" / "summary.md").read_text()
    assert "0 of 1 points reached the target; not reached: granian db c10" in summary


def test_no_analysed_trial_gives_no_line_not_a_crash() -> None:
    """TRIALS=auto records that are all warm-up starts (or runs replaced by a repeat) leave
    no point to judge: the summary has no TRIALS=auto line (it used to crash on max([]))."""
    from dataclasses import replace

    from bench.core.record import Record, load_records
    from bench.report.precision import summary_lines

    fixtures = Path(__file__).resolve().parent.parent / "fixtures" / "records" / "machine-a"
    records: list[Record] = load_records(fixtures)[0]
    auto = {"target": 0.05, "budget_s": 60, "min_trials": 3, "max_trials": 20}
    warm = [
        replace(r, metadata={**r.metadata, "trials_auto": auto, "warmup_start": True})
        for r in records
    ]
    assert summary_lines(warm) == []
    assert summary_lines([replace(w, metadata={**w.metadata, "warmup_start": False}) for w in warm])


def test_a_tune_search_has_no_trials_auto_line() -> None:
    """make tune's runs carry trials_auto (its budget) and metadata.tune: the search is
    reported as its answer, never as a TRIALS=auto point that missed its target."""
    from dataclasses import replace

    from bench.core.record import Record, load_records
    from bench.report.precision import summary_lines

    fixtures = Path(__file__).resolve().parent.parent / "fixtures" / "records" / "machine-a"
    records: list[Record] = load_records(fixtures)[0]
    auto = {"target": 0.05, "budget_s": 60, "min_trials": 3, "max_trials": 20}
    plain = [replace(r, metadata={**r.metadata, "trials_auto": auto}) for r in records]
    assert summary_lines(plain)
    searched = [replace(r, metadata={**r.metadata, "tune": {"objective": "rps"}}) for r in plain]
    assert summary_lines(searched) == []
