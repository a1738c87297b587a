"""The summary's statistics against synthetic samples with a known truth."""

import math

import numpy as np
import pytest

from bench.report.stats import difference, estimate, quantile_interval, tie_ranks

REPS = 2000


def _lognormal(rng: np.random.Generator, center: float, sd: float, n: int) -> np.ndarray:
    return center * np.exp(rng.normal(0.0, sd, n))


@pytest.mark.parametrize("trials", [3, 5])
@pytest.mark.parametrize("sd", [0.05, 0.10, 0.30])
def test_equal_distributions_are_a_tie_in_at_least_95_percent(trials: int, sd: float) -> None:
    # sd 0.10 is the median spread (sd of log req/s over trials) of the shipped reference
    # run; 0.30 its 90th percentile.
    rng = np.random.default_rng(trials * 100 + int(sd * 100))
    ties = sum(
        not difference(
            _lognormal(rng, 1000, sd, trials), _lognormal(rng, 1000, sd, trials)
        ).significant
        for _ in range(REPS)
    )
    assert ties / REPS >= 0.95


def test_a_20_percent_shift_at_realistic_noise_is_significant() -> None:
    # 5 trials (the default TRIALS), sd 5 % per trial: a quiet machine's noise.
    rng = np.random.default_rng(7)
    hits = 0
    for _ in range(REPS):
        d = difference(_lognormal(rng, 1000, 0.05, 5), _lognormal(rng, 1200, 0.05, 5))
        hits += d.significant and d.low is not None and d.low > 1.0
    assert hits / REPS >= 0.95


def test_ratio_interval_is_consistent_with_the_test() -> None:
    rng = np.random.default_rng(3)
    for _ in range(300):
        d = difference(_lognormal(rng, 1000, 0.1, 5), _lognormal(rng, 1100, 0.1, 5))
        assert d.low is not None and d.high is not None
        assert d.low <= d.ratio <= d.high
        assert d.significant == (d.low > 1.0 or d.high < 1.0)


def test_interval_of_a_point_covers_the_truth_about_95_percent() -> None:
    rng = np.random.default_rng(11)
    covered = 0
    for _ in range(REPS):
        e = estimate(list(_lognormal(rng, 500, 0.1, 5)))
        assert e is not None and e.low is not None and e.high is not None
        covered += e.low <= 500 <= e.high
    assert 0.93 <= covered / REPS <= 0.97


def test_untestable_and_degenerate_cases() -> None:
    assert estimate([]) is None
    single = estimate([100.0])
    assert single is not None and single.low is None and single.n == 1
    assert not difference([100.0], [200.0]).testable  # one trial a side: no test, a tie
    assert difference([100.0], [200.0]).ratio == pytest.approx(2.0)
    zero = difference([0.0, 0.0], [10.0, 12.0])
    assert not zero.testable
    same = difference([5.0, 5.0], [5.0, 5.0])
    assert not same.significant
    apart = difference([5.0, 5.0], [6.0, 6.0])
    assert apart.significant and apart.ratio == pytest.approx(1.2)


def test_tie_ranks_share_a_rank_only_where_the_data_cannot_separate() -> None:
    rng = np.random.default_rng(5)
    samples = {
        "fast": list(_lognormal(rng, 2000, 0.02, 5)),
        "fast-too": list(_lognormal(rng, 1990, 0.02, 5)),
        "slow": list(_lognormal(rng, 1000, 0.02, 5)),
        "one-trial": [400.0],
    }
    ranked = {r.key: r for r in tie_ranks(samples)}
    assert ranked["fast"].rank == ranked["fast-too"].rank == 1
    assert ranked["fast"].tied and ranked["fast-too"].label == "1="
    assert ranked["slow"].rank == 3
    # one trial cannot be told apart from the group above it: it shares its rank, marked
    assert ranked["one-trial"].rank == 3 and ranked["one-trial"].tied
    by_p99 = tie_ranks({"a": [10.0, 10.5, 9.8], "b": [20.0, 21.0, 19.5]}, higher_is_better=False)
    assert [r.key for r in by_p99] == ["a", "b"] and [r.rank for r in by_p99] == [1, 2]


def test_quantile_interval_from_per_request_latencies() -> None:
    rng = np.random.default_rng(9)
    latencies = rng.exponential(10.0, 20_000)
    value, low, high = quantile_interval(latencies, 0.99)
    truth = -10.0 * math.log(0.01)
    assert low <= value <= high
    assert low <= truth <= high
    assert quantile_interval([1.0], 0.99) is None
