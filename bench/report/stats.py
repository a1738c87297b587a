"""Statistics of the summary: confidence intervals, corrected comparisons, rank intervals,
capacity with an interval, study verdicts.

Input: per-trial figures (requests/s or a latency percentile of each trial: the trial, one
run, is the unit of every interval and test), per-request latency series of one run (only for
a within-run interval where there is a single trial), and capacity steps' pass/fail per rate.
Output: an `Estimate` per point, a `Difference` per pair, `Ranked` rank intervals, a
`Capacity` with its interval, a `Verdict` per study check.

The method (stated in the summary's header and the README): trial figures are compared on a
log scale, because benchmark noise is multiplicative and the figure we report is a ratio.
- A point's 95 % confidence interval is Student's t interval of the mean of log values (a
  geometric mean with its interval), `scipy.stats.t`. Open-loop percentiles too: each trial's
  p99, then the geometric mean over trials — never a percentile over the pooled requests of
  several runs, whose order-statistic interval treats autocorrelated requests as independent.
- Two configurations differ when Welch's t-test on the log values gives p < 0.05 with the
  conservative degrees of freedom min(n_A, n_B) − 1 (Welch–Satterthwaite's estimate is
  unstable with 3–5 trials). The ratio B/A has the interval of the same test.
- A family of comparisons (every pair at one load on one machine; every point of a `make
  compare`; a study's checks) is corrected with Holm's step-down method, which bounds the
  chance of any false "significant" in the family by 5 % whatever the dependence. A
  corrected difference carries the interval at the level of the Holm step that tested it
  (α/m for the smallest p, then α/(m − 1), …), widened to reach 1.00× where the step-down
  stopped before it, so "significant" and "the interval excludes 1.00×" stay one statement.
- Identical trials on both sides (zero spread: rounded or capped figures) are untestable,
  p None, never "p = 0".
- Ranks are intervals: a configuration's best possible rank is 1 + the number of
  configurations significantly better than it, its worst the count minus those significantly
  worse. Two configurations that differ significantly never share rank 1; one not
  significantly worse than any other always includes rank 1.
- Capacity: steps repeated at rates around the knee give the share of trials that passed per
  rate; the capacity is where that share (made non-increasing by pooling) crosses 1/2,
  interpolated on log rate, with a bootstrap over trials (never narrower than the ladder step
  that holds the crossing).
- A single open-loop trial gets only a within-run interval, labelled so: a moving-block
  bootstrap over the run's requests in send order, blocks of 500 ms.
Mann-Whitney U (benchstat's test) was not chosen: with 3 trials per side its smallest
possible p is 0.10, so no difference could ever be called real at the default trial count.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
from scipy import stats

from bench.core import defaults

ALPHA = 0.05
CONFIDENCE = 1 - ALPHA
BLOCK_S = 0.5  # within-run bootstrap block: a stall's neighbours stay in one block
BOOTSTRAP_REPS = 2000


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
    """B against A: the ratio of geometric means B/A, its interval, Welch's p-value.
    `p` is None when no test is possible (fewer than 2 trials on a side). After a family
    correction `p` is the Holm-adjusted p-value, `p_raw` the test's own, `family` the number
    of comparisons, and the interval is at the level Holm tested this comparison at."""

    ratio: float | None
    low: float | None
    high: float | None
    p: float | None
    p_raw: float | None = None
    family: int = 1
    log_se: float | None = None
    df: int | None = None

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


def central(values: Sequence[float]) -> float:
    """Trials' figures in one number without an interval: the geometric mean (estimate's
    centre), the arithmetic mean where one is 0 (a log has no 0) — what every table says of an
    arm, so one arm never shows a median in one table and a geometric mean in the next."""
    if min(values) > 0:
        return statistics.geometric_mean(values)
    return statistics.fmean(values)


def _interval(diff: float, se: float, df: int, level_alpha: float) -> tuple[float, float]:
    half = float(stats.t.ppf(1 - level_alpha / 2, df)) * se
    return math.exp(diff - half), math.exp(diff + half)


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
    if se == 0.0:
        # identical trials on both sides: rounded or capped figures (Locust's p99 at 3,000 ms
        # every trial), not an absence of noise; no spread to test against, so untestable
        # (never "significant, p = 0", which no family correction could weaken)
        return Difference(ratio, None, None, None)
    # Welch's statistic with the conservative degrees of freedom min(n) - 1
    df = min(la.size, lb.size) - 1
    diff = float(lb.mean() - la.mean())
    p = float(2 * stats.t.sf(abs(diff / se), df))
    low, high = _interval(diff, se, df, ALPHA)
    return Difference(ratio, low, high, p, p, 1, se, df)


def holm(pvalues: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjusted p-values (None stays None: an untestable comparison is not
    counted in the family)."""
    tested = sorted((p, i) for i, p in enumerate(pvalues) if p is not None)
    m = len(tested)
    adjusted: list[float | None] = [None] * len(pvalues)
    running = 0.0
    for rank, (p, index) in enumerate(tested):
        running = max(running, min(1.0, (m - rank) * p))
        adjusted[index] = running
    return adjusted


def correct(diffs: Sequence[Difference]) -> list[Difference]:
    """A family of differences with Holm-adjusted p-values, each interval at the level of the
    Holm step that tested it (α/(m − step)), widened to reach 1.00× where the step-down
    stopped before it, so it excludes 1.00× exactly when the adjusted p is below 5 %."""
    raws = [d.p_raw if d.p_raw is not None else d.p for d in diffs]
    adjusted = holm(raws)
    family = sum(p is not None for p in adjusted)
    # Holm's step of each tested comparison: the smallest raw p is step 0, tested at α/m
    order = sorted((p, i) for i, p in enumerate(raws) if p is not None)
    step = {index: rank for rank, (_, index) in enumerate(order)}
    out = []
    for i, (diff, p_adj) in enumerate(zip(diffs, adjusted, strict=True)):
        if p_adj is None or diff.ratio is None:
            out.append(diff)
            continue
        low, high = diff.low, diff.high
        if diff.log_se and diff.df:
            level = ALPHA / (family - step[i])
            low, high = _interval(math.log(diff.ratio), diff.log_se, diff.df, level)
            if p_adj >= ALPHA:  # not significant: the interval may not exclude 1.00×
                low, high = min(low, 1.0), max(high, 1.0)
        out.append(replace(diff, low=low, high=high, p=p_adj, p_raw=raws[i], family=family))
    return out


def pairwise(samples: Mapping[object, Sequence[float]]) -> dict[tuple, Difference]:
    """Every pair (a, b) of the family, b against a, Holm-corrected over the family."""
    keys = list(samples)
    pairs = [(a, b) for i, a in enumerate(keys) for b in keys[i + 1 :]]
    raw = [difference(samples[a], samples[b]) for a, b in pairs]
    return dict(zip(pairs, correct(raw), strict=True))


@dataclass(frozen=True)
class Ranked:
    """A configuration's rank interval among the others at one point: `low` is 1 + the
    number significantly better, `high` the count minus those significantly worse
    (Holm-corrected over every pair): `1`, or `1–3` where the data cannot order it."""

    key: object
    low: int
    high: int

    @property
    def rank(self) -> int:
        return self.low

    @property
    def tied(self) -> bool:
        return self.low != self.high

    @property
    def label(self) -> str:
        return f"{self.low}–{self.high}" if self.tied else str(self.low)


def rank_intervals(
    samples: Mapping[object, Sequence[float]], higher_is_better: bool = True
) -> list[Ranked]:
    """Rank intervals in order of the geometric mean (best first)."""
    estimates = {key: estimate(values) for key, values in samples.items()}
    present = [key for key in samples if estimates[key] is not None]
    present.sort(key=lambda k: estimates[k].center, reverse=higher_is_better)  # type: ignore[union-attr]
    better = dict.fromkeys(present, 0)  # how many are significantly better than the key
    worse = dict.fromkeys(present, 0)
    for (a, b), diff in pairwise({k: samples[k] for k in present}).items():
        if not diff.significant or diff.ratio is None:
            continue
        b_wins = (diff.ratio > 1) == higher_is_better
        winner, loser = (b, a) if b_wins else (a, b)
        better[loser] += 1
        worse[winner] += 1
    return [Ranked(k, 1 + better[k], len(present) - worse[k]) for k in present]


def tie_ranks(
    samples: Mapping[object, Sequence[float]], higher_is_better: bool = True
) -> list[Ranked]:
    """The ranks of the summary's tables (rank intervals; kept under its old name)."""
    return rank_intervals(samples, higher_is_better)


def quantile_interval(latencies: Sequence[float], q: float) -> tuple[float, float, float] | None:
    """A percentile of per-request latencies and its distribution-free 95 % interval
    (order statistics: `scipy.stats.quantile_test`). Valid only for independent requests:
    requests of one run are not (a stall delays its neighbours), so the summary never shows
    it; `within_run_interval` is the interval for one run."""
    array = np.asarray(latencies, dtype=float)
    if array.size < 2:
        return None
    value = float(np.quantile(array, q))
    interval = stats.quantile_test(array, q=value, p=q).confidence_interval(CONFIDENCE)
    low = float(interval.low) if np.isfinite(interval.low) else float(array.min())
    high = float(interval.high) if np.isfinite(interval.high) else float(array.max())
    return value, low, high


def within_run_interval(
    series: Sequence[float], q: float, block: int, reps: int = 1000, seed: int = 0
) -> tuple[float, float, float] | None:
    """A percentile of one run's per-request latencies (in send order) and its 95 % interval
    from a circular moving-block bootstrap: blocks of `block` consecutive requests keep the
    run's autocorrelation (a stall and the requests queued behind it) inside a resample.
    It says how precisely this run measured its own p99, not how another run would read."""
    array = np.asarray(series, dtype=float)
    n = array.size
    if n < 2:
        return None
    block = max(1, min(int(block), n))
    rng = np.random.default_rng(seed)
    count = math.ceil(n / block)
    values = []
    for _ in range(0, reps, 100):  # 100 resamples at a time: memory stays ~n × 100
        starts = rng.integers(0, n, size=(100, count))
        index = (starts[:, :, None] + np.arange(block)[None, None, :]) % n
        values.extend(np.quantile(array[index.reshape(100, -1)[:, :n]], q, axis=1))
    low, high = np.quantile(values, [ALPHA / 2, 1 - ALPHA / 2])
    return float(np.quantile(array, q)), float(low), float(high)


def block_for(rate_rps: float | None) -> int:
    """Requests in one bootstrap block: BLOCK_S of arrivals at the offered rate."""
    return max(1, round((rate_rps or 0.0) * BLOCK_S))


@dataclass(frozen=True)
class Capacity:
    """The offered rate where the share of passing trials crosses 1/2, with its interval;
    `center` None when no rate failed (`below` False) or every rate failed (`below` True).
    `bracket_only`: no rate around the crossing was stepped 3 times (a search without the
    knee's repeats: single steps, and the search's confirmation): the interval rests on
    single steps."""

    center: float | None
    low: float | None
    high: float | None
    trials_at_knee: int
    bracket_only: bool = False
    below: bool = False


def _pooled(shares: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """The non-increasing fit of pass shares over rising rates (pool adjacent violators)."""
    blocks: list[list[float]] = []  # [mean, weight, count]
    for share, weight in zip(shares, weights, strict=True):
        blocks.append([float(share), float(weight), 1])
        while len(blocks) > 1 and blocks[-2][0] < blocks[-1][0]:
            mean2, w2, c2 = blocks.pop()
            mean1, w1, c1 = blocks.pop()
            blocks.append([(mean1 * w1 + mean2 * w2) / (w1 + w2), w1 + w2, c1 + c2])
    return np.repeat([b[0] for b in blocks], [b[2] for b in blocks])


def _crossing(rates: np.ndarray, passed: np.ndarray, counts: np.ndarray) -> float:
    """Where the pooled pass share crosses 1/2, on log rate (the ladder's ends when it
    never does: its lowest rate if even that fails most, its highest if that passes)."""
    share = _pooled(passed / counts, counts)
    logs = np.log(rates)
    if share[0] < 0.5:
        return float(rates[0])
    for i in range(1, len(rates)):
        if share[i] < 0.5:
            frac = (share[i - 1] - 0.5) / (share[i - 1] - share[i])
            return float(math.exp(logs[i - 1] + frac * (logs[i] - logs[i - 1])))
    return float(rates[-1])


def capacity(
    outcomes: Mapping[float, Sequence[bool]], confidence: float = CONFIDENCE, seed: int = 0
) -> Capacity:
    """Capacity from pass/fail per offered rate: the crossing of 1/2 and a percentile
    interval of the crossing over draws of each rate's pass chance (Jeffreys posterior),
    widened to the ladder step that holds the crossing."""
    rates = np.array(sorted(r for r in outcomes if outcomes[r]), dtype=float)
    if rates.size == 0:
        return Capacity(None, None, None, 0)
    trials = [np.asarray(outcomes[r], dtype=bool) for r in rates]
    counts = np.array([t.size for t in trials], dtype=float)
    passed = np.array([t.sum() for t in trials], dtype=float)
    if passed.sum() == counts.sum():
        return Capacity(None, None, None, 0)  # nothing failed: the knee is above the ladder
    if passed[0] == 0 and _pooled(passed / counts, counts)[0] < 0.5:
        return Capacity(None, None, None, 0, below=True)
    center = _crossing(rates, passed, counts)
    rng = np.random.default_rng(seed)
    # each rate's pass chance drawn from its Jeffreys posterior Beta(k + 1/2, n - k + 1/2): a
    # rate that passed 3 of 3 may still fail at times (resampling its trials never would, and
    # covered 90 % at 3 trials, 38 % at 1 in capacity_coverage; this covers 99 % and 100 %)
    chances = rng.beta(passed + 0.5, counts - passed + 0.5, size=(BOOTSTRAP_REPS, rates.size))
    boot = [_crossing(rates, row * counts, counts) for row in chances]
    tail = (1 - confidence) / 2
    low, high = (float(v) for v in np.quantile(boot, [tail, 1 - tail]))
    # never narrower than the rates that bracket the crossing for sure: the highest below it
    # where every trial passed, the lowest above it where every trial failed
    sure_pass = rates[(rates <= center) & (passed == counts)]
    sure_fail = rates[(rates >= center) & (passed == 0)]
    step_low = float(sure_pass.max()) if sure_pass.size else float(rates[0])
    step_high = float(sure_fail.min()) if sure_fail.size else float(rates[-1])
    near = [counts[i] for i, r in enumerate(rates) if step_low <= r <= step_high]
    return Capacity(
        center,
        min(low, step_low),
        max(high, step_high),
        int(sum(near)),
        bracket_only=max(counts[(rates >= step_low) & (rates <= step_high)]) < 3,
    )


def crossing(outcomes: Mapping[float, Sequence[bool]]) -> float | None:
    """capacity()'s centre alone (no interval: one race round's figure): the crossing of 1/2,
    or None where capacity() has none (nothing failed, or the lowest rate failed most)."""
    rates = np.array(sorted(r for r in outcomes if outcomes[r]), dtype=float)
    if rates.size == 0:
        return None
    counts = np.array([len(outcomes[r]) for r in rates], dtype=float)
    passed = np.array([sum(bool(v) for v in outcomes[r]) for r in rates], dtype=float)
    if passed.sum() == counts.sum() or (
        passed[0] == 0 and _pooled(passed / counts, counts)[0] < 0.5
    ):
        return None
    return _crossing(rates, passed, counts)


def capacity_ratio(a: Capacity, b: Capacity) -> tuple[float, float, float] | None:
    """A/B and an interval holding with ≥ 95 % when both capacities' intervals are at 97.5 %
    (the caller passes those): [low_A / high_B, high_A / low_B]."""
    if None in (a.center, a.low, a.high, b.center, b.low, b.high):
        return None
    return a.center / b.center, a.low / b.high, a.high / b.low  # type: ignore[operator]


@dataclass(frozen=True)
class Verdict:
    """A study check's verdict: `reproduced`, `not reproduced` or `inconclusive`, the reason
    in words and the difference (ratio B/A with its interval) it rests on."""

    outcome: str
    reason: str
    difference: Difference


CLAIMS = ("higher", "lower", "equal")


def decide(
    values_a: Sequence[float],
    values_b: Sequence[float],
    claim: str,
    margin: float = 0.05,
    family: int = 1,
) -> Verdict:
    """Whether the trials say B is `higher`/`lower` than A, or `equal` within ±margin:
    "reproduced" / "not reproduced" only when the ratio's interval (Bonferroni-corrected over
    the study's `family` checks) lies wholly on one side, otherwise "inconclusive"."""
    if claim not in CLAIMS:
        raise ValueError(f"claim must be one of {', '.join(CLAIMS)}, not {claim!r}")
    diff = difference(values_a, values_b)
    n = min(sum(v is not None for v in values_a), sum(v is not None for v in values_b))
    if diff.ratio is None or diff.log_se is None or diff.df is None:
        return Verdict("inconclusive", f"{n} trial(s) a side: no interval", diff)
    low, high = _interval(math.log(diff.ratio), diff.log_se, diff.df, ALPHA / family)
    diff = replace(diff, low=low, high=high, family=family)
    where = f"{diff.ratio:.2f}× [{low:.2f}–{high:.2f}]"
    if claim == "equal":
        lo_bound, hi_bound = 1 / (1 + margin), 1 + margin
        if lo_bound <= low and high <= hi_bound:
            return Verdict("reproduced", f"{where} within ±{margin:.0%}", diff)
        if high < lo_bound or low > hi_bound:
            return Verdict("not reproduced", f"{where} wholly outside ±{margin:.0%}", diff)
        return Verdict("inconclusive", f"{where} neither within nor outside ±{margin:.0%}", diff)
    higher = claim == "higher"
    if (low > 1.0) if higher else (high < 1.0):
        return Verdict("reproduced", f"{where} wholly {'above' if higher else 'below'} 1", diff)
    if (high <= 1.0) if higher else (low >= 1.0):
        return Verdict("not reproduced", f"{where}: B is not {claim} than A", diff)
    return Verdict("inconclusive", f"{where} contains 1.00×", diff)


@dataclass(frozen=True)
class Shift:
    """B − A on the figures' own scale (for counts and shares, where a zero has no log): the
    difference of means and its interval, Bonferroni-corrected over `family`."""

    diff: float
    low: float
    high: float
    n: int


def shift(values_a: Sequence[float], values_b: Sequence[float], family: int = 1) -> Shift | None:
    """The difference of means B − A with Welch's interval (degrees of freedom min(n) − 1, as
    `difference`) at 1 − 0.05/family; None with fewer than 2 trials on a side."""
    a = np.asarray([v for v in values_a if v is not None], dtype=float)
    b = np.asarray([v for v in values_b if v is not None], dtype=float)
    n = int(min(a.size, b.size))
    if n < 2:
        return None
    diff = float(b.mean() - a.mean())
    se = math.sqrt(b.var(ddof=1) / b.size + a.var(ddof=1) / a.size)
    # identical trials on both sides (a count that stayed 0): the interval is the point
    half = float(stats.t.ppf(1 - ALPHA / family / 2, n - 1)) * se
    return Shift(diff, diff - half, diff + half, n)


def _lognormal(rng: np.random.Generator, center: float, sd: float, n: int) -> np.ndarray:
    return center * np.exp(rng.normal(0.0, sd, n))


def power_table(trials: Sequence[int], shifts: Sequence[float], sd: float, reps: int) -> None:
    """How often a true difference is called significant by one pair's test (printed)."""
    rng = np.random.default_rng(0)
    print(f"\nshare of {reps} simulated pairs called significant, noise sd {sd:.0%} (log)")
    print("trials " + " ".join(f"{s:>6.0%}" for s in shifts) + "   (true difference)")
    for n in trials:
        cells = []
        for shift in shifts:
            hits = sum(
                difference(_lognormal(rng, 1, sd, n), _lognormal(rng, 1 + shift, sd, n)).significant
                for _ in range(reps)
            )
            cells.append(f"{hits / reps:>6.0%}")
        print(f"{n:>6} " + " ".join(cells))


def family_false_positives(configs: int, n: int, sd: float, reps: int, seed: int = 1) -> float:
    """Share of families of identical configurations in which some pair is called
    significant after Holm's correction (the family-wise false-positive rate)."""
    rng = np.random.default_rng(seed)
    splits = 0
    for _ in range(reps):
        samples = {i: _lognormal(rng, 1000, sd, n) for i in range(configs)}
        splits += any(r.low > 1 for r in rank_intervals(samples))
    return splits / reps


def ar1_latencies(rng: np.random.Generator, n: int, phi: float) -> np.ndarray:
    """A latency series whose log is AR(1) (a stall lifts its neighbours): lag-1
    autocorrelation about `phi`, stationary log-sd 0.5, median 5 ms."""
    noise = rng.normal(0.0, 0.5 * math.sqrt(1 - phi * phi), n)
    logs = np.empty(n)
    logs[0] = rng.normal(0.0, 0.5)
    for i in range(1, n):
        logs[i] = phi * logs[i - 1] + noise[i]
    return 5.0 * np.exp(logs)


def within_run_coverage(reps: int, n: int, phi: float, block: int) -> tuple[float, float]:
    """Coverage of the true p99 by the block-bootstrap and the order-statistic intervals."""
    rng = np.random.default_rng(2)
    truth = 5.0 * math.exp(0.5 * stats.norm.ppf(0.99))
    boot = order = 0
    for i in range(reps):
        series = ar1_latencies(rng, n, phi)
        _, lo, hi = within_run_interval(series, 0.99, block, reps=400, seed=i)  # type: ignore[misc]
        boot += lo <= truth <= hi
        _, lo, hi = quantile_interval(series, 0.99)  # type: ignore[misc]
        order += lo <= truth <= hi
    return boot / reps, order / reps


def capacity_coverage(reps: int, repeats: int, seed: int = 3, start_sd: float = 0.0) -> float:
    """Coverage of a true capacity of 1,000 req/s by the capacity interval, pass chance
    falling logistically on log rate around it, the ladder defaults.CAPACITY_KNEE × a found
    rate, one round per trial; `start_sd`: each trial (a fresh server start) has its own
    capacity, log-normal around the truth with this sd."""
    rng = np.random.default_rng(seed)
    covered = 0
    for i in range(reps):
        found = 1000 * math.exp(rng.normal(0, 0.05))
        ladder = [found * f for f in defaults.CAPACITY_KNEE]
        outcomes: dict[float, list[bool]] = {r: [] for r in ladder}
        for _ in range(repeats):
            truth = 1000 * math.exp(rng.normal(0, start_sd))
            for rate in ladder:
                chance = 1 / (1 + math.exp(math.log(rate / truth) / 0.04))
                outcomes[rate].append(bool(rng.random() < chance))
        cap = capacity(outcomes, seed=i)
        covered += cap.low is not None and cap.low <= 1000 <= cap.high  # type: ignore[operator]
    return covered / reps


def _report() -> None:
    """The simulations quoted in the README (python -m bench.report.stats)."""
    power_table((3, 5, 10), (0.0, 0.1, 0.2, 0.3, 0.5), 0.10, 2000)
    print("\nfamily-wise false positives, identical configurations, sd 10 %, Holm over all pairs")
    for configs in (2, 4, 13):
        for n in (3, 5):
            rate = family_false_positives(configs, n, 0.10, 400)
            print(f"  {configs:>2} configurations, {n} trials: {rate:.1%}")
    boot, order = within_run_coverage(100, 5000, 0.9, 500)
    print(
        "\ntrue p99 covered in 100 AR(1) runs (5,000 requests, lag-1 0.9):"
        f" block bootstrap (500) {boot:.0%}, order statistics {order:.0%}"
    )
    for start_sd in (0.0, 0.05):
        print(f"capacity interval covers the truth, start-to-start sd {start_sd:.0%}:", end="")
        for repeats in (1, 3, 5):
            print(
                f" {repeats} trial(s) {capacity_coverage(200, repeats, start_sd=start_sd):.0%}",
                end="",
            )
        print()


if __name__ == "__main__":  # python -m bench.report.stats
    _report()
