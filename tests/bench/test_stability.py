"""Stability warnings (bench.report.stability): pyperf's `check` thresholds over a point's
trials: spread, an outlier trial, a one-way drift; over synthetic trials and fixture records."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest

from bench.core.record import Record, load_records
from bench.report import stability

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def test_spread_warns_at_ten_percent_of_ln_not_below() -> None:
    """sd of ln(values) 0.09 passes, 0.11 warns: pyperf's 10 % of the mean."""
    for sd, warns in ((0.09, False), (0.11, True)):
        # ln values -sd, 0, +sd: their sample standard deviation is exactly sd
        values = [1000 * math.exp(x * sd) for x in (-1.0, 0.0, 1.0)]
        spread, _, warnings = stability.check(values)
        assert spread == pytest.approx(sd)
        assert any(w.startswith("sd of ln") for w in warnings) is warns


def test_outlier_trial_warns_at_25_percent() -> None:
    """Five steady trials and one 40 % above the geometric mean warns; 10 % does not."""
    assert any("off the mean" in w for w in stability.check([100.0] * 5 + [150.0])[2])
    assert not any("off the mean" in w for w in stability.check([100.0] * 5 + [110.0])[2])


def test_drift_needs_one_way_movement_of_ten_percent_over_three_trials() -> None:
    """100, 104, 112 (+12 %, each up) drifts; 100, 112, 104 rises and falls: no drift;
    +6 % one way is within; two trials never count as a drift."""
    assert stability.drift_of([100.0, 104.0, 112.0]) == pytest.approx(math.log(1.12))
    assert any("drift" in w for w in stability.check([100.0, 104.0, 112.0])[2])
    assert stability.drift_of([100.0, 112.0, 104.0]) is None
    assert not any("drift" in w for w in stability.check([100.0, 103.0, 106.0])[2])
    assert stability.drift_of([100.0, 150.0]) is None
    assert any("drift" in w for w in stability.check([112.0, 104.0, 100.0])[2])  # downwards too


def test_steady_trials_give_no_warning() -> None:
    """Trials within ±2 % in any order: nothing to say."""
    assert stability.check([1000.0, 1015.0, 990.0, 1005.0, 998.0])[2] == []


def _records() -> list[Record]:
    records, _ = load_records(FIXTURES / "records")
    return records


def test_fixture_records_name_the_one_noisy_point() -> None:
    """The fixtures' granian plaintext c10 trials (15,000 and 13,000 req/s: sd of ln 0.101)
    pass the spread threshold; the other multi-trial points (spread 0.01, 0.02) do not."""
    unstable = stability.unstable_points(_records())
    assert [u.label for u in unstable] == ["granian plaintext c10"]
    assert unstable[0].spread == pytest.approx(0.1012, abs=1e-4)
    line = stability.summary_lines(unstable, "details/stability.md")[0]
    assert "granian plaintext c10" in line and "machine was unstable" in line
    assert "(details/stability.md)" in line


def test_drift_is_read_in_start_order_not_file_order() -> None:
    """Three trials whose start times put them 100 → 105 → 115 req/s drift; the same
    records with their start times shuffled (105, 100, 115) do not."""
    base = next(r for r in _records() if r.status == "ok" and r.offered_rps is None)

    def trial(n: int, rps: float, minute: int) -> Record:
        meta = {**base.metadata, "started_at": f"2026-11-01T00:{minute:02d}:00Z"}
        return dataclasses.replace(base, trial=n, rps=rps, metadata=meta, run_id=f"r{n}")

    drifting = [trial(1, 100.0, 1), trial(2, 105.0, 2), trial(3, 115.0, 3)]
    (found,) = stability.unstable_points(drifting)
    assert any("drift +15%" in w for w in found.warnings)
    shuffled = [trial(1, 100.0, 2), trial(2, 105.0, 1), trial(3, 115.0, 3)]
    assert all("drift" not in w for u in stability.unstable_points(shuffled) for w in u.warnings)


def test_no_warning_no_line() -> None:
    """A stable set of records: the summary gets no line at all."""
    assert stability.summary_lines([], "details/stability.md") == []
