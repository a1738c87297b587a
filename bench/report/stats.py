"""Statistics of the summary: confidence intervals, significance of a difference, tie groups.

Input: per-trial figures (requests/s or a latency percentile of each trial) or per-request
latencies. Output: an `Estimate` per point, a `Difference` per pair, ranks with ties.

The method (stated in the summary's header and the README): trial figures are compared on a
log scale, because benchmark noise is multiplicative and the figure we report is a ratio.
- A point's 95 % confidence interval is Student's t interval of the mean of log values (a
  geometric mean with its interval), `scipy.stats.t`.
- Two configurations differ significantly when Welch's t-test on the log values gives
  p < 0.05, with the conservative degrees of freedom min(n_A, n_B) − 1 (`scipy.stats.t`):
  the Welch–Satterthwaite estimate of the degrees of freedom is unstable with 3–5 trials and
  left the false-positive rate at 3.3–5.7 % in our simulations; the conservative one keeps it
  near 2 % (tests/bench/test_stats.py measures it: equal distributions come out "no
  difference" in more than 95 % of repetitions). The ratio of the geometric means B/A has the
  95 % interval of the same test, so "significant" and "the interval excludes 1.00×" are one
  statement.
- Per-request latencies (oha) give a percentile's interval without trials: the
  distribution-free interval of a quantile from order statistics, `scipy.stats.quantile_test`.
Mann-Whitney U (benchstat's test) was not chosen: with 3 trials per side its smallest
possible p is 0.10, so no difference could ever be called real at the default trial count.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

ALPHA = 0.05
CONFIDENCE = 1 - ALPHA


@dataclass(frozen=True)
class Estimate:
    """A point's figure over its trials: the geometric mean and its 95 % interval (None with
    fewer than 2 trials or a non-positive figure)."""

    center: float
    low: float | None
    high: float | None
    n: int


@dataclass(frozen=True)
class Difference:
    """B against A: the ratio of geometric means B/A, its 95 % interval, Welch's p-value.
    `p` is None when no test is possible (fewer than 2 trials on a side)."""

    ratio: float | None
    low: float | None
    high: float | None
    p: float | None

    @property
    def significant(self) -> bool:
        return self.p is not None and self.p < ALPHA

    @property
    def testable(self) -> bool:
        return self.p is not None


def _logs(values: Sequence[float]) -> np.ndarray | None:
    array = np.asarray([v for v in values if v is not None], dtype=float)
    if array.size == 0 or (array <= 0).any():
        return None
    return np.log(array)


def estimate(values: Sequence[float]) -> Estimate | None:
    """The geometric mean of the trials' figures and its 95 % t interval."""
    present = [v for v in values if v is not None]
    if not present:
        return None
    logs = _logs(present)
    if logs is None:  # a zero figure (no request served): arithmetic mean, no interval
        return Estimate(float(np.mean(present)), None, None, len(present))
    center = float(np.exp(logs.mean()))
    if logs.size < 2:
        return Estimate(center, None, None, 1)
    sem = float(stats.sem(logs))
    if sem == 0.0:
        return Estimate(center, center, center, int(logs.size))
    low, high = stats.t.interval(CONFIDENCE, logs.size - 1, loc=logs.mean(), scale=sem)
    return Estimate(center, math.exp(low), math.exp(high), int(logs.size))


def difference(a: Sequence[float], b: Sequence[float]) -> Difference:
    """Whether B differs from A (Welch's t-test on log values) and the ratio B/A with its
    95 % interval."""
    la, lb = _logs(a), _logs(b)
    if la is None or lb is None:
        ma = float(np.mean(a)) if len(a) else 0.0
        return Difference(float(np.mean(b)) / ma if ma else None, None, None, None)
    ratio = math.exp(lb.mean() - la.mean())
    if la.size < 2 or lb.size < 2:
        return Difference(ratio, None, None, None)
    se = math.sqrt(lb.var(ddof=1) / lb.size + la.var(ddof=1) / la.size)
    if se == 0.0:  # identical trials on both sides (fixtures)
        return Difference(ratio, ratio, ratio, 1.0 if ratio == 1.0 else 0.0)
    # Welch's statistic with the conservative degrees of freedom min(n) - 1
    df = min(la.size, lb.size) - 1
    t_stat = (lb.mean() - la.mean()) / se
    p = float(2 * stats.t.sf(abs(t_stat), df))
    half = float(stats.t.ppf(1 - ALPHA / 2, df)) * se
    diff = lb.mean() - la.mean()
    return Difference(ratio, math.exp(diff - half), math.exp(diff + half), p)


def quantile_interval(latencies: Sequence[float], q: float) -> tuple[float, float, float] | None:
    """A percentile of per-request latencies and its distribution-free 95 % interval
    (order statistics: `scipy.stats.quantile_test`). Requests of one run are not independent
    (a stall delays its neighbours), so the interval is a lower bound on the uncertainty."""
    array = np.asarray(latencies, dtype=float)
    if array.size < 2:
        return None
    value = float(np.quantile(array, q))
    interval = stats.quantile_test(array, q=value, p=q).confidence_interval(CONFIDENCE)
    low = float(interval.low) if np.isfinite(interval.low) else float(array.min())
    high = float(interval.high) if np.isfinite(interval.high) else float(array.max())
    return value, low, high


@dataclass(frozen=True)
class Ranked:
    """A configuration's rank among the others at one point; `tied` when it shares the rank
    of a better one it does not differ from significantly."""

    key: object
    rank: int
    tied: bool

    @property
    def label(self) -> str:
        return f"{self.rank}=" if self.tied else str(self.rank)


def tie_ranks(
    samples: dict[object, Sequence[float]], higher_is_better: bool = True
) -> list[Ranked]:
    """Ranks with ties: configurations in order of their geometric mean; one joins the rank
    of the group above when it does not differ significantly from that group's leader (or
    when the difference cannot be tested), so the order is only as strict as the data."""
    estimates = {key: estimate(values) for key, values in samples.items()}
    present = [key for key in samples if estimates[key] is not None]
    present.sort(key=lambda k: estimates[k].center, reverse=higher_is_better)  # type: ignore[union-attr]
    ranked: list[Ranked] = []
    leader = None
    for position, key in enumerate(present, start=1):
        if leader is not None and not difference(samples[leader.key], samples[key]).significant:
            ranked.append(Ranked(key, leader.rank, True))
            continue
        leader = Ranked(key, position, False)
        ranked.append(leader)
    # the group leader is marked tied too when someone joined it
    joined = {r.rank for r in ranked if r.tied}
    return [Ranked(r.key, r.rank, r.tied or r.rank in joined) for r in ranked]


def _power_table(trials: Sequence[int], shifts: Sequence[float], sd: float, reps: int) -> None:
    """How often a true difference is called significant (a simulation, printed)."""
    rng = np.random.default_rng(0)
    print(f"share of {reps} simulated comparisons called significant, noise sd {sd:.0%} (log)")
    print("trials " + " ".join(f"{s:>6.0%}" for s in shifts) + "   (true difference)")
    for n in trials:
        cells = []
        for shift in shifts:
            hits = 0
            for _ in range(reps):
                a = np.exp(rng.normal(0.0, sd, n))
                b = np.exp(rng.normal(math.log(1 + shift), sd, n))
                hits += difference(a, b).significant
            cells.append(f"{hits / reps:>6.0%}")
        print(f"{n:>6} " + " ".join(cells))


if __name__ == "__main__":  # python -m bench.report.stats: the power of the default trial count
    _power_table((3, 5, 7, 10), (0.0, 0.1, 0.2, 0.3, 0.5), 0.10, 2000)
