"""Stability warnings (bench.report.stability): pyperf's `check` thresholds over a point's
trials: spread, an outlier trial, a one-way drift; over synthetic trials and fixture records."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest

from bench.core.record import Record, load_records
from bench.report import stability
from bench.report.cells import knobs_label
from bench.report.groups import groups

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def test_spread_warns_when_its_lower_bound_passes_ten_percent() -> None:
    """3 trials: the sd's one-sided 95 % lower bound is s·√(2/χ²₀.₉₅(2)) = s·√(2/(−2 ln 0.05))
    (the chi-square with 2 degrees of freedom is exponential): a sample sd of 0.17 gives
    0.098 and passes, 0.18 gives 0.104 and warns; the old rule warned at 0.11."""
    factor = math.sqrt(2 / (-2 * math.log(0.05)))
    for sd, warns in ((0.11, False), (0.17, False), (0.18, True)):
        # ln values -sd, 0, +sd: their sample standard deviation is exactly sd
        values = [1000 * math.exp(x * sd) for x in (-1.0, 0.0, 1.0)]
        spread, _, warnings = stability.check(values)
        assert spread == pytest.approx(sd)
        assert stability.spread_bound(values) == pytest.approx(sd * factor)
        assert any(w.startswith("sd of ln") for w in warnings) is warns


@pytest.mark.parametrize("trials", [3, 5])
def test_quiet_points_are_rarely_flagged_and_noisy_ones_mostly(trials: int) -> None:
    """Simulated points at a quiet noise (sd of ln 0.07, where 3 trials were flagged 29 % of
    the time): at most 5 % flagged; at a noise of 0.3 at least half of them."""
    rng = np.random.default_rng(70 + trials)
    reps = 2000

    def flagged(sd: float) -> float:
        points = (1000 * np.exp(rng.normal(0.0, sd, trials)) for _ in range(reps))
        return sum(bool(stability.check(list(p))[2]) for p in points) / reps

    assert flagged(0.07) <= 0.05
    assert flagged(0.30) >= 0.5


def test_outlier_trial_warns_at_25_percent() -> None:
    """Five steady trials and one 40 % above the geometric mean warns; 10 % does not."""
    assert any("off the mean" in w for w in stability.check([100.0] * 5 + [150.0])[2])
    assert not any("off the mean" in w for w in stability.check([100.0] * 5 + [110.0])[2])


def test_drift_needs_one_way_movement_of_ten_percent_over_five_trials() -> None:
    """100, 102, 104, 107, 112 (+12 %, each up) drifts; the same trials rising and falling do
    not; +6 % one way is within; three or four trials never count as a drift (they come out
    in one order by chance 33 % and 8 % of the time)."""
    rising = [100.0, 102.0, 104.0, 107.0, 112.0]
    assert stability.drift_of(rising) == pytest.approx(math.log(1.12))
    assert any("drift" in w for w in stability.check(rising)[2])
    assert stability.drift_of([100.0, 104.0, 102.0, 107.0, 112.0]) is None
    assert not any("drift" in w for w in stability.check([100.0, 101, 103, 104, 106.0])[2])
    assert stability.drift_of([100.0, 104.0, 112.0]) is None
    assert stability.drift_of([100.0, 104.0, 108.0, 112.0]) is None
    assert any("drift" in w for w in stability.check(rising[::-1])[2])  # downwards too


def test_steady_trials_give_no_warning() -> None:
    """Trials within ±2 % in any order: nothing to say."""
    assert stability.check([1000.0, 1015.0, 990.0, 1005.0, 998.0])[2] == []


def _records() -> list[Record]:
    records, _ = load_records(FIXTURES / "records")
    return records


def test_fixture_records_have_no_point_shown_to_be_noisy() -> None:
    """The fixtures' granian plaintext c10 trials (15,000 and 13,000 req/s: sd of ln 0.101)
    pass the old point-estimate threshold, but two trials bound the sd only at ≥ 0.05: not
    flagged. The same point with three more trials as far apart is."""
    records = _records()
    assert stability.unstable_points(records) == []
    (noisy,) = [
        g for g in groups(records).values()
        if g[0].server == "granian" and g[0].scenario == "plaintext" and len(g) == 2
    ]  # fmt: skip
    assert sorted(r.rps for r in noisy) == [13000.0, 15000.0]
    more = [
        dataclasses.replace(noisy[i % 2], trial=10 + i, rps=rps, run_id=f"more{i}")
        for i, rps in enumerate((11000.0, 17500.0, 12000.0))
    ]
    (unstable,) = stability.unstable_points(records + more)
    label = f"granian {knobs_label(noisy[0].knobs or {})} plaintext c10"
    assert knobs_label(noisy[0].knobs or {}).startswith("w")  # the knobs name the point
    assert unstable.label == label and unstable.trials == 5
    line = stability.summary_lines([unstable], "details/stability.md")[0]
    assert label in line and "machine was unstable" in line
    assert "(details/stability.md)" in line


def test_drift_is_read_in_start_order_not_file_order() -> None:
    """Five trials whose start times put them 100 → 103 → 105 → 110 → 115 req/s drift; the
    same records with the first two start times swapped do not."""
    base = next(r for r in _records() if r.status == "ok" and r.offered_rps is None)

    def trial(n: int, rps: float, minute: int) -> Record:
        meta = {**base.metadata, "started_at": f"2026-11-01T00:{minute:02d}:00Z"}
        return dataclasses.replace(base, trial=n, rps=rps, metadata=meta, run_id=f"r{n}")

    rps = (100.0, 103.0, 105.0, 110.0, 115.0)
    drifting = [trial(n, value, n) for n, value in enumerate(rps, 1)]
    (found,) = stability.unstable_points(drifting)
    assert any("drift +15%" in w for w in found.warnings)
    shuffled = [trial(n, value, (2, 1, 3, 4, 5)[n - 1]) for n, value in enumerate(rps, 1)]
    assert all("drift" not in w for u in stability.unstable_points(shuffled) for w in u.warnings)


def test_no_warning_no_line() -> None:
    """A stable set of records: the summary gets no line at all."""
    assert stability.summary_lines([], "details/stability.md") == []
