"""The race's decision engine: which configurations are separated, which are equivalent, and
which still need rounds.

Input: each configuration's figure per round (req/s, or a latency percentile with
`higher_is_better=False`; None or a non-positive figure for a failed run), how many looks
have been taken and the most the budget allows. Output: a `Standing`: the ranking (best
first), each adjacent pair of it with its ratio, interval, state and adjusted p, the
configurations still racing, and the one-line answer ("a = b (±5 %) > c ? d").

The method (docs/statistics.md, "The race"):
- Ranking: the configuration effects of an additive two-way fit of ln(figure) on
  configuration and round (least squares over the rounds each ran), so a configuration that
  left the race early is not ranked on the rounds' drift. Configurations without a figure
  rank last.
- Each adjacent pair is analysed on its within-round ln ratios, on the rounds where both
  have a figure (paired; df = rounds − 1): "separated" by a two-sided paired t-test of
  mean ln ratio = 0; "equivalent within ±margin" by TOST on the same ln ratios, bounds
  ±ln(1 + margin) (symmetric on the log scale: 1/(1.05)× to 1.05×), i.e. the 1 − 2α interval
  of the mean ln ratio inside those bounds. For one pair at most one of the two null
  hypotheses holds (the ratio is either 1 or not within the margin, or neither), so the two
  tests share one error budget.
- Error over the looks: alpha spending with the power family's linear member (Kim and
  DeMets, ρ = 1), α(t) = α·t, t = the pair's paired rounds / max_looks (N), the looks taken
  on a schedule of the pair's own paired rounds: 3, 4, 5, 7, 9, 12, 15, 19, 24, 30, 38, …
  (each a quarter more than the one before) and N last. The test at look n_k is at level
  α·(n_k − n_{k−1})/N (n_0 = 0); between looks a pair keeps the test of its last look (on
  those rounds), so rounds between looks spend nothing. The levels of one pair sum to at most
  α, so the chance that it is ever decided wrongly is at most α by the union bound, whatever
  the looks' correlation (conservative: exact group-sequential boundaries would be less so,
  but need the looks' information fractions fixed in advance, which a race whose
  configurations leave does not have). Testing after every round instead spends α/N per
  round: in a race of 30 minutes (N = 100 rounds) a pair 1.27× apart with ln ratios varying
  by 0.09 stayed undecided after 9 rounds at t = 7.5 (issue 30, /tmp/race0 of 2026-11-25);
  the schedule's geometric looks keep the union bound's cost to a level about a fifth of
  t = n_k/N, for at most a quarter more rounds than a look after every round. The level is a
  function of the pair's own rounds, not of the race's look: a pair whose configurations
  stopped racing has the same rounds, so the same test and the same decision, at every
  later look. Linear rather than Pocock-like (α·ln(1 + (e − 1)t)) or O'Brien-Fleming-like
  spending: in the simulated 4-server race of tests/bench/test_decision.py (1.00, 1.00,
  0.72, 0.54×, noise sd 0.025, 20 looks) a look after every round decided 95 of 100 races
  within 15 looks, Pocock-like 86 and O'Brien-Fleming-like 97 (but a median of 11 looks
  against 9). An anytime-valid confidence sequence was not chosen: it needs no budget but is
  wider at every look for the same error, and the race has a budget.
- Holm over the pairs: each pair's decision p (the smaller of its separation and TOST
  p-values, each scaled by α / the pair's spent level) is compared in Holm's step-down order;
  a pair is decided when its Holm-adjusted p is below α.
- The screen (judge(screen=True): make bench's races of many servers): before the pairs, a
  configuration clearly behind the best is screened out, as F-Race does (Birattari et al.,
  2002; irace): at each look point, over the rounds every configuration still in ran,
  Friedman's test of the configurations' ranks within rounds (scipy.stats) and, where it
  rejects, Conover's post-hoc test of each against the best mean rank (scikit-posthocs;
  Nemenyi's where every round ranked them alike, which leaves Conover's no residual
  variance), Holm over those; and each one's own paired t-test of its ln ratios to the best,
  Holm over those too: a configuration whose two adjusted p are both below the look's level
  is out for good, and the later looks rank only those left. Conover's variance comes from
  how consistently the whole field ranks: with a slower tail that never swaps and two tied
  leaders, it screened a tied leader out in 11.5 % of simulated 4-server races (issue 57;
  `screen_drops`), the paired test's from the two compared alone (0 % with it). The cost:
  at paired ln ratios varying by 0.21 the tail goes after 7 rounds, not 3, and 3 rounds
  (df = 2) screen nothing at a 13-server race's levels. The
  screen spends α/2 over the looks as the pairs do (linear spending, union bound), so a wrong
  screening and a wrong pair decision at one point stay within 1.5 α together; it stops
  when fewer than SCREEN_MIN configurations are left (a rank test of 3 in a few rounds has no
  power). The pairs are then judged among the configurations left only; the screened ones
  rank after them, each below the best it was screened against.
- Counts (events out of tries: failed requests, 502s) are compared by an exact test of the
  two rates (Fisher's), never "equivalent": a count has no ratio margin. A question may give
  `count_margin`, a difference of rates (0.001: 0.1 % of the tries) that "a at most b" can
  tolerate: a is then "within the margin" (state equivalent) when the one-sided score test
  of H0 rate_a − rate_b ≥ count_margin rejects (Farrington-Manning; statsmodels'
  test_proportions_2indep), which zero events on both sides can pass; 1 failure in 18,000
  against 0 is otherwise never decided.
- Drift: a pair is "separated" only when its ln ratios show no trend over its rounds (OLS
  slope on the round order, scipy's linregress, p ≥ DRIFT_ALPHA); a trending one stays
  undecided, "drifted": its mean says when it was measured, not which is faster. In
  `simulate` (a tie, b drifting −3 % over 20 rounds, sd 0.05, 400 races, seed 57) it moved
  "separated" from 8.3 % to 7.6 % only: the early looks, where most wrong separations
  happen, have too few rounds to see a trend.
- At least 3 paired rounds before any decision. A pair with a configuration that has no
  figure stays undecided, with the reason; so does a pair whose ln ratio did not vary at all
  (figures quantised alike: no spread to test, never "p = 0").
"""

from __future__ import annotations

import bisect
import functools
import itertools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np
from scipy import stats

State = Literal["separated", "equivalent", "undecided"]

MIN_ROUNDS = 3  # paired rounds before any decision (df = 2)
SCREEN_MIN = 4  # configurations left for the screen to test (fewer: the pairs decide)
SCREEN_SHARE = 0.5  # the screen's share of α (its own spending over the looks)
DRIFT_ALPHA = 0.05  # a trend of a pair's ln ratios over its rounds this clear holds "separated"
DRIFT_MIN_ROUNDS = 5  # fewer paired rounds: no trend test (see _test)
NO_SPREAD = 1e-9  # ln ratios varying less than this did not vary (float rounding)
ALPHA = 0.05
MARGIN = 0.05


def margin_text(margin: float) -> str:
    """An equivalence margin as every renderer writes it: 0.05 -> "±5 %", 0.025 -> "±2.5 %"
    (each wrote its own, and MARGIN=2.5 read "±2 %" in some)."""
    return f"±{round(margin * 100, 2):g} %"


@dataclass(frozen=True)
class Pair:
    """Two configurations adjacent in the ranking: `better` first."""

    better: str
    worse: str
    ratio: float  # better/worse on the figure's scale (>= 1 for req/s when higher is better)
    low: float | None  # the interval of that ratio at the level this look spends
    high: float | None
    state: State
    rounds: int  # paired rounds used (both present)
    p: float | None  # the adjusted p of "they differ" (None: untestable)
    p_equivalent: float | None = None  # the adjusted p of "within ±margin" (TOST)
    level: float | None = None  # the two-sided level spent on this pair at this look
    reason: str = ""  # why an undecided pair is undecided ("" when decided)
    sd: float | None = None  # the sd of the paired ln ratios (None: fewer than 2 rounds)
    # judge_family's questions: the ratio a/b is compared with `offset` (a published ratio, a
    # factor); `band`: "separated" means outside ±margin of it (not ≠ offset); scale "log"
    # (ratio and interval a/b), "linear" (zeros: a − b × offset and its interval on the
    # figures' own scale) or "count" (ratio of two rates, an exact test, no interval)
    offset: float = 1.0
    band: bool = False
    scale: str = "log"
    margin: float = MARGIN

    @property
    def confidence(self) -> float | None:
        """The interval's confidence: 1 − 2·level for an equivalent pair (TOST's), else
        1 − level (None: no interval)."""
        if self.level is None or self.low is None:
            return None
        return 1 - (2 if self.state == "equivalent" else 1) * self.level

    def level_text(self) -> str:
        """The interval's confidence as a reader sees it: "99.6 % interval" ("": none)."""
        if self.confidence is None:
            return ""
        return f"{100 * self.confidence:.3g} % interval"


@dataclass(frozen=True)
class Screened:
    """A configuration the screen put out of the race: below `best` at `rounds` rounds."""

    config: str
    best: str  # the best mean rank at that look
    rounds: int  # the look point (rounds every configuration still in had run)
    p: float  # Holm-adjusted over that look's comparisons with the best
    level: float  # the level that look spent
    test: str = "Conover"  # or "Nemenyi" (every round ranked them alike)


@dataclass(frozen=True)
class Standing:
    """The race after one look: ranking, adjacent pairs, who still races, whether done."""

    ranking: tuple[str, ...]  # best first (by the paired two-way fit of ln figures)
    pairs: tuple[Pair, ...]  # adjacent pairs of the ranking's unscreened part, in order
    racing: frozenset[str]  # configurations with at least one undecided pair
    done: bool  # every adjacent pair decided
    margin: float = MARGIN
    screened: tuple[Screened, ...] = ()  # out of the race below the best (ranked last)
    apart: tuple[str, ...] = ()  # baselines beside a screened race, not raced

    def leaders(self) -> tuple[str, ...]:
        """The best configuration and those not separated from it: the ranking's prefix up to
        its first separated pair (one name when the best is separated from the next)."""
        if not self.ranking:
            return ()
        out = [self.ranking[0]]
        for pair in self.pairs:
            if pair.state == "separated":
                break
            out.append(pair.worse)
        return tuple(out)

    def line(self) -> str:
        """The answer in one line: "granian = uwsgi (±5 %) > uvicorn ? gunicorn-sync", two
        equivalences in a row as the pairs tested ("a = b (±5 %); b = c (±5 %)"), then the
        screened ones: "≫ waitress, daphne (screened out)"."""
        if not self.ranking:
            return ""
        parts = [self.ranking[0]]
        chained = False  # the last pair written was an equivalence
        for pair in self.pairs:
            if pair.state == "separated":
                parts.append(f"> {pair.worse}")
            elif pair.state == "equivalent":
                # "a = b = c" would claim a = c, never tested (6.4 % apart in 1 % of simulated
                # races, issue 57): each equivalence is written as the pair that was tested
                if chained:
                    parts[-1] += ";"
                    parts.append(pair.better)
                parts.append(f"= {pair.worse} ({margin_text(self.margin)})")
            else:
                parts.append(f"? {pair.worse}")
            chained = pair.state == "equivalent"
        if self.screened:
            out = {s.config for s in self.screened}
            names = ", ".join(c for c in self.ranking if c in out)
            parts.append(f"≫ {names} (screened out)")
        text = " ".join(parts)
        return f"{text}; not raced: {', '.join(self.apart)}" if self.apart else text


LOOK_GROWTH = 1.25  # each look at least a quarter more paired rounds than the one before


@functools.cache
def look_points(max_looks: int) -> tuple[int, ...]:
    """The paired-round counts at which a pair is tested in a budget of `max_looks`:
    3, 4, 5, 7, 9, 12, 15, 19, … and max_looks itself last."""
    total = max(max_looks, MIN_ROUNDS)
    points = [MIN_ROUNDS]
    while points[-1] < total:
        grown = max(points[-1] + 1, math.ceil(points[-1] * LOOK_GROWTH))
        points.append(min(total, grown))
    return tuple(points)


def tested_at(rounds: int, max_looks: int) -> int:
    """The look a pair with `rounds` paired rounds is judged at: the last look point at or
    below them (0: none yet). Past the budget, its last look."""
    points = look_points(max_looks)
    return points[bisect.bisect_right(points, rounds) - 1] if rounds >= MIN_ROUNDS else 0


def spent(rounds: int, max_looks: int, alpha: float = ALPHA) -> float:
    """The level of the test at `rounds` paired rounds of a budget of `max_looks`: at look
    point n_k, α·(n_k − n_{k−1})/N (n_0 = 0; linear spending, Bonferroni over the looks);
    0 between look points (those rounds are not tested), below MIN_ROUNDS and past the
    budget."""
    points = look_points(max_looks)
    if rounds not in points:
        return 0.0
    k = points.index(rounds)
    before = points[k - 1] if k else 0
    return alpha * (rounds - before) / points[-1]


def _logs(series: Mapping[int, float | None]) -> dict[int, float]:
    return {r: math.log(v) for r, v in series.items() if v is not None and v > 0}


def _rank(logs: Mapping[str, Mapping[int, float]], higher_is_better: bool) -> list[str]:
    """Configurations best first by the configuration effects of ln y = a_config + b_round
    (least squares), those without a figure last in their given order."""
    present = [c for c, by_round in logs.items() if by_round]
    absent = [c for c in logs if not logs[c]]
    if not present:
        return absent
    rounds = sorted({r for c in present for r in logs[c]})
    col = {r: i for i, r in enumerate(rounds)}
    rows, ys = [], []
    for i, config in enumerate(present):
        for r, y in logs[config].items():
            row = np.zeros(len(present) + len(rounds))
            row[i] = 1.0
            row[len(present) + col[r]] = 1.0
            rows.append(row)
            ys.append(y)
    # the round effects are determined up to a constant shared with the configurations'
    # (and a configuration that shares no round with the others floats): lstsq's minimum-norm
    # solution fixes it, and differences between connected configurations are unaffected
    coef = np.linalg.lstsq(np.array(rows), np.array(ys), rcond=None)[0]
    effect = {config: float(coef[i]) for i, config in enumerate(present)}
    order = sorted(present, key=lambda c: (-effect[c] if higher_is_better else effect[c], c))
    return order + absent


@dataclass(frozen=True)
class _Test:
    """One adjacent pair's raw analysis before the family correction."""

    diffs: np.ndarray  # ln(better) − ln(worse) per paired round
    p_sep: float | None
    p_eq: float | None
    se: float | None
    reason: str
    margin: float = MARGIN
    band: bool = False  # separated: outside ±margin, not ≠ 0
    scale: str = "log"  # log, linear (no equivalence: no margin on the figures' own scale), count
    ratio: float | None = None  # count: the ratio of the two rates
    drift_p: float | None = None  # the p of a trend of the ln ratios over the rounds


def _test(
    diffs: np.ndarray, margin: float, no_figure: bool, band: bool = False, scale: str = "log"
) -> _Test:
    n = diffs.size
    kind = {"margin": margin, "band": band, "scale": scale}
    if no_figure:
        return _Test(diffs, None, None, None, "no figure (every run failed)", **kind)  # type: ignore[arg-type]
    if n < MIN_ROUNDS:
        why = f"{n} paired round(s), {MIN_ROUNDS} needed"
        return _Test(diffs, None, None, None, why, **kind)  # type: ignore[arg-type]
    sd = float(np.std(diffs, ddof=1))
    if sd < NO_SPREAD:
        # identical ratios every round: quantised figures, not proof (zero spread is no
        # evidence of zero noise); the pair stays undecided rather than "p = 0". Not `== 0`:
        # identical ratios of quantised rates (capacity crossings on one ladder: 2 × 94.87 /
        # 94.87 and 2 × 84.85 / 84.85) differ in ln by float rounding, ~1e-16
        why = "the same ratio every round: no spread to test"
        return _Test(diffs, None, None, None, why, **kind)  # type: ignore[arg-type]
    se = sd / math.sqrt(n)
    mean = float(diffs.mean())
    df = n - 1
    bound = math.log(1 + margin)
    # one call for the three tails (scipy's per-call overhead dominates a race's looks): the
    # separation test's, and TOST's two one-sided tests against the margin (its p the larger)
    tails = stats.t.sf(np.array([abs(mean), mean + bound, bound - mean]) / se, df)
    p_sep = float(2 * tails[0])
    p_eq = float(max(tails[1], tails[2]))
    if band:
        # outside the band: |mean| > bound, two-sided (the interval wholly past one edge); its
        # null (inside) and TOST's (outside) cannot both be false: one error budget again
        outside = stats.t.sf(np.array([mean - bound, -mean - bound]) / se, df)
        p_sep = float(min(1.0, 2 * outside.min()))
    if scale == "linear":
        p_eq = 1.0  # no margin on a count's own scale: separated or undecided
    # a ratio that moves over the race (one configuration drifting −3 % while the other holds)
    # has a mean ≠ 0 that says when it was measured, not which is faster: OLS slope on the
    # round order (df = n − 2)
    # (from DRIFT_MIN_ROUNDS on: over 3 rounds a slope has one degree of freedom, and the float
    # rounding of three equal ratios reads as a perfect trend)
    drift_p = float(stats.linregress(np.arange(n), diffs).pvalue) if n >= DRIFT_MIN_ROUNDS else None
    return _Test(diffs, p_sep, p_eq, se, "", **kind, drift_p=drift_p)  # type: ignore[arg-type]


def judge(
    figures: Mapping[str, Mapping[int, float]],
    *,
    margin: float = MARGIN,
    alpha: float = ALPHA,
    higher_is_better: bool = True,
    look: int,
    max_looks: int,
    screen: bool = False,
    exempt: frozenset[str] = frozenset(),
) -> Standing:
    """figures: configuration -> {round number -> the trial's figure (req/s, or p99 with
    higher_is_better=False)}. look: how many looks have been taken so far including this one
    (1-based); max_looks: the most the budget allows (for alpha spending).

    Each pair's level depends on its own paired rounds and max_looks, not on `look` (checked
    only): a pair frozen by its configurations leaving is judged alike at every later look.
    max_looks must stay the same for the whole race (the levels are spent against it).
    screen: screen out configurations clearly behind the best first (make bench's races);
    `exempt`: configurations the screen neither tests nor measures the others against (the
    baselines: nginx-static is not the best Python server)."""
    if max_looks < 1 or not 1 <= look <= max_looks:
        raise ValueError(f"look must be 1..max_looks ({max_looks}), not {look}")
    if not 0 < alpha < 1 or margin <= 0:
        raise ValueError(f"alpha must be in (0, 1) and margin above 0, not {alpha}, {margin}")
    all_logs = {config: _logs(series) for config, series in figures.items()}
    contenders = {c: v for c, v in all_logs.items() if c not in exempt}
    out = screen_out(contenders, higher_is_better, max_looks, alpha) if screen else ()
    # baselines are not raced where two others are (nginx-static is not a Python server)
    apart = set(exempt) & set(all_logs) if screen and len(contenders) >= 2 else set()
    gone = {s.config for s in out}
    logs = {c: v for c, v in all_logs.items() if c not in gone and c not in apart}
    ranking = _rank(logs, higher_is_better)
    pairs = _adjacent_pairs(logs, ranking, margin, alpha, max_looks)
    racing = _racing(logs, ranking, pairs)
    tail = [c for c in _rank(all_logs, higher_is_better) if c in gone or c in apart]
    return Standing(
        (*ranking, *tail),
        tuple(pairs),
        frozenset(racing),
        not racing,
        margin,
        tuple(out),
        tuple(c for c in tail if c in apart),
    )


def _adjacent_pairs(
    logs: Mapping[str, Mapping[int, float]],
    ranking: list[str],
    margin: float,
    alpha: float,
    max_looks: int,
) -> list[Pair]:
    """Each adjacent pair of the ranking tested on its paired ln ratios, Holm over them."""
    tests, levels = [], []
    for better, worse in itertools.pairwise(ranking):
        common = sorted(set(logs[better]) & set(logs[worse]))
        # the first rounds up to the pair's last look point: between looks it keeps that test
        used = common[: tested_at(len(common), max_looks)] if len(common) >= MIN_ROUNDS else common
        diffs = np.array([logs[better][r] - logs[worse][r] for r in used], dtype=float)
        tests.append(_test(diffs, margin, not logs[better] or not logs[worse]))
        levels.append(spent(diffs.size, max_looks, alpha))
    return _holm(list(itertools.pairwise(ranking)), tests, levels, alpha)


def _racing(
    logs: Mapping[str, Mapping[int, float]], ranking: list[str], pairs: list[Pair]
) -> set[str]:
    """The configurations an undecided pair still needs."""
    racing: set[str] = set()
    for pair in pairs:
        if pair.state != "undecided":
            continue
        # a pair with a failed configuration waits on that one alone: more rounds of the
        # other could not decide it
        stuck = {c for c in (pair.better, pair.worse) if not logs[c]}
        racing |= stuck or {pair.better, pair.worse}
    if len(ranking) == 1 and not logs[ranking[0]]:
        racing.add(ranking[0])
    return racing


def screen_out(
    logs: Mapping[str, Mapping[int, float]],
    higher_is_better: bool,
    max_looks: int,
    alpha: float = ALPHA,
) -> tuple[Screened, ...]:
    """The configurations the screen puts out (see the module's docstring), replayed look by
    look from the figures alone, so the harness and the summary screen alike. `logs`:
    configuration -> round -> ln figure."""
    out: list[Screened] = []
    for n in look_points(max_looks):
        gone = {s.config for s in out}
        alive = [c for c in logs if logs[c] and c not in gone]
        if len(alive) < SCREEN_MIN:
            break
        common = sorted(set.intersection(*(set(logs[c]) for c in alive)))
        if len(common) < n:
            break
        level = spent(n, max_looks, alpha * SCREEN_SHARE)
        matrix = np.array([[logs[c][r] for c in alive] for r in common[:n]])
        if not higher_is_better:
            matrix = -matrix  # rank 1: the best figure
        found = _screen_look(matrix, alive, level)
        out.extend(replace(s, rounds=n) for s in found)
    return tuple(out)


def _screen_look(matrix: np.ndarray, names: list[str], level: float) -> list[Screened]:
    """One look: rounds x configurations (higher is better). Friedman's omnibus test first;
    where it rejects at `level`, each configuration against the best mean rank, Holm."""
    import scikit_posthocs  # pandas and statsmodels: loaded when a race is judged, not before

    if level <= 0 or np.ptp(matrix, axis=1).max() <= NO_SPREAD:
        return []
    ranks = stats.rankdata(-matrix, axis=1)  # 1: the best of the round
    best = int(np.argmin(ranks.mean(axis=0)))
    others = [i for i in range(len(names)) if i != best]
    paired = _paired_screen(matrix, best, others)
    # Conover borrows its variance from how consistently the whole field ranks: a slow tail
    # that never swaps makes two tied leaders "differ" (two leaders 1 % apart in the same
    # order 3 rounds, one swap in the tail: Holm-adjusted p = 2.5e-5). The pair's own paired
    # test, whose variance comes from the two compared, must separate it too; checked first
    # because it is cheap and usually decides that nobody goes
    if not (paired < level).any():
        return []
    if stats.friedmanchisquare(*matrix.T).pvalue >= level:
        return []
    alike = bool((ranks == ranks[0]).all())  # Conover's residual rank variance is 0
    test = "Nemenyi" if alike else "Conover"
    with np.errstate(divide="ignore", invalid="ignore"):
        if alike:
            table = scikit_posthocs.posthoc_nemenyi_friedman(matrix)
        else:
            table = scikit_posthocs.posthoc_conover_friedman(matrix)
    raw = np.array([float(table.iloc[best, i]) for i in others])
    if not np.isfinite(raw).all():
        return []
    adjusted = holm_adjust(raw)
    return [
        Screened(names[i], names[best], 0, float(max(p, p_pair)), level, test)
        for i, p, p_pair in zip(others, adjusted, paired, strict=True)
        if p < level and p_pair < level
    ]


def _paired_screen(matrix: np.ndarray, best: int, others: list[int]) -> np.ndarray:
    """Each of `others` against the `best` column by the paired t-test of their ln ratios
    over the look's rounds, Holm-adjusted over them (1: no spread, nothing to test)."""
    diffs = matrix[:, [best]] - matrix[:, others]
    with np.errstate(divide="ignore", invalid="ignore"):
        raw = stats.ttest_1samp(diffs, 0.0, axis=0).pvalue
    # a pair whose ratio did not vary has no spread to test: never "p = 0"
    spread = np.std(diffs, axis=0, ddof=1) > NO_SPREAD
    raw = np.where(spread & np.isfinite(raw), raw, 1.0)
    return holm_adjust(raw)


def holm_adjust(raw: np.ndarray) -> np.ndarray:
    """Holm's step-down adjusted p-values of one family (statsmodels' multipletests ran a
    garbage collection per call: 0.15 s a look, most of a simulated race's time)."""
    order = np.argsort(raw, kind="stable")
    m = raw.size
    scaled = np.minimum(1.0, (m - np.arange(m)) * raw[order])
    adjusted = np.empty(m)
    adjusted[order] = np.maximum.accumulate(scaled)  # step-down: never below an earlier step
    return adjusted


def _holm(
    names: list[tuple[str, str]],
    tests: list[_Test],
    levels: list[float],
    alpha: float,
    family: int = 0,
) -> list[Pair]:
    """The pairs with Holm's step-down over the testable pairs' spending-scaled p-values
    (`family`: at least this many hypotheses, those not testable yet counted as p = 1)."""
    scaled_sep: dict[int, float] = {}
    scaled_eq: dict[int, float] = {}
    for i, (test, level) in enumerate(zip(tests, levels, strict=True)):
        if test.p_sep is None or test.p_eq is None or level <= 0:
            continue
        scaled_sep[i] = min(1.0, test.p_sep * alpha / level)
        scaled_eq[i] = min(1.0, test.p_eq * alpha / level)
    order = sorted(scaled_sep, key=lambda i: min(scaled_sep[i], scaled_eq[i]))
    m = max(len(order), family)
    running = 0.0
    step: dict[int, int] = {}
    adjusted: dict[int, tuple[float, float]] = {}
    for rank, i in enumerate(order):
        factor = m - rank
        p_sep_adj = max(running, min(1.0, factor * scaled_sep[i]))
        p_eq_adj = max(running, min(1.0, factor * scaled_eq[i]))
        running = max(running, min(p_sep_adj, p_eq_adj))
        step[i] = factor
        adjusted[i] = (p_sep_adj, p_eq_adj)
    return [
        _pair((better, worse), test, adjusted.get(i), levels[i] / step.get(i, 1), alpha)
        for i, ((better, worse), test) in enumerate(zip(names, tests, strict=True))
    ]


def _pair(
    names: tuple[str, str],
    test: _Test,
    adjusted: tuple[float, float] | None,
    level: float,
    alpha: float,
) -> Pair:
    """One pair's state, ratio and interval at its Holm-adjusted p-values (None: untested)."""
    kind = {"band": test.band, "scale": test.scale, "margin": test.margin}
    n = test.diffs.size
    mean = float(test.diffs.mean()) if n else math.nan
    if test.scale == "count":
        ratio = test.ratio if test.ratio is not None else math.nan
    else:
        ratio = mean if test.scale == "linear" or not n else math.exp(mean)
    sd = float(np.std(test.diffs, ddof=1)) if n >= 2 else None
    if adjusted is None:
        reason = test.reason or "more paired rounds than the budget's looks"
        return Pair(*names, ratio, None, None, "undecided", n, None, reason=reason, sd=sd, **kind)  # type: ignore[arg-type]
    p_sep, p_eq = adjusted
    state: State = "undecided"
    drifted = test.drift_p is not None and test.drift_p < DRIFT_ALPHA
    if p_sep < alpha and not drifted:  # a difference within the margin is still a difference
        state = "separated"
    elif p_eq < alpha and p_sep >= alpha:
        state = "equivalent"
    low = high = None
    if test.se is not None:
        # an equivalent pair shows the interval TOST decided on, 1 − 2·level (its two one-sided
        # tests at `level` each): the two-sided 1 − level one poked past ±margin in 39–45 % of
        # simulated equivalent verdicts (issue 57)
        tails = 1 if state == "equivalent" else 2
        half = float(stats.t.ppf(1 - level / tails, n - 1)) * test.se
        low, high = mean - half, mean + half
        if state != "separated":
            # the step-down stopped before this pair: its interval must not lie wholly past
            # the line it was not shown to cross (1.00×, or the band around the offset)
            edge = math.log(1 + test.margin) if test.band else 0.0
            low, high = min(low, edge), max(high, -edge)
        if test.scale == "log":
            low, high = math.exp(low), math.exp(high)
    reason = "" if state != "undecided" else "neither separated nor within the margin yet"
    if state == "undecided" and drifted and p_sep < alpha:
        reason = f"drifted: the ratio trends over the rounds (slope p = {test.drift_p:.2g})"
    if state == "undecided" and test.scale != "log" and not (test.p_eq or 1.0) < 1.0:
        reason = "not separated yet"  # no margin on a count's or a difference's own scale
    return Pair(*names, ratio, low, high, state, n, p_sep, p_eq, level, reason, sd, **kind)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Question:
    """One comparison of a family (a study's checks, a fix against a default): a against b,
    round by round. `pairs`: round -> (a's figure, b's figure), compared as a/b against
    `offset`; or `counts`: round -> (a's events, a's exposure, b's events, b's exposure),
    compared by an exact test (`binomial`: events out of exposure tries, Fisher's; otherwise
    events over exposure time, the conditional binomial test of two Poisson rates)."""

    a: str
    b: str
    pairs: Mapping[int, tuple[float, float]] | None = None
    counts: Mapping[int, tuple[int, float, int, float]] | None = None
    offset: float = 1.0  # the published ratio, or the factor a is held to
    margin: float = MARGIN  # equivalent within ±margin of the offset (a ratio's band − 1)
    band: bool = False  # separated means outside ±margin of the offset, not ≠ offset
    binomial: bool = True
    looks: int | None = None  # the race's max_looks for this question (None: the family's)
    # counts: the difference of rates "a at most b" tolerates (None: none, never equivalent)
    count_margin: float | None = None


def count_p(
    a: tuple[int, float], b: tuple[int, float], binomial: bool = True, factor: float = 1.0
) -> tuple[float, float]:
    """The exact one-sided p-values that a's rate is above and below b's × factor: Fisher's
    test for events out of tries (binomial, factor 1), else the binomial test of a's share of
    the events given their total (two Poisson rates over exposures; factor scales b's)."""
    (events_a, n_a), (events_b, n_b) = a, b
    if binomial and factor == 1.0:
        table = [[events_a, n_a - events_a], [events_b, n_b - events_b]]
        above = float(stats.fisher_exact(table, alternative="greater").pvalue)
        below = float(stats.fisher_exact(table, alternative="less").pvalue)
        return above, below
    total = events_a + events_b
    if total == 0:
        return 1.0, 1.0
    share = n_a / (n_a + n_b * factor)
    above = float(stats.binomtest(events_a, total, share, alternative="greater").pvalue)
    below = float(stats.binomtest(events_a, total, share, alternative="less").pvalue)
    return above, below


def _count_test(q: Question, used: list[int]) -> _Test:
    """A count question on its first `used` rounds: two-sided exact p (twice the smaller
    one-sided), no equivalence (a count's margin is not defined), no interval."""
    assert q.counts is not None
    sums = np.array([q.counts[r] for r in used], dtype=float).sum(axis=0) if used else None
    diffs = np.zeros(len(used))
    kind = {"margin": q.margin, "scale": "count"}
    if sums is None:
        return _Test(diffs, None, None, None, "not measured", **kind)  # type: ignore[arg-type]
    events_a, n_a, events_b, n_b = sums
    rate_a, rate_b = events_a / n_a if n_a else math.nan, events_b / n_b if n_b else math.nan
    ratio = rate_a / (rate_b * q.offset) if rate_b else (math.inf if rate_a else math.nan)
    if not n_a or not n_b:
        return _Test(diffs, None, None, None, "nothing sent on a side", **kind, ratio=ratio)  # type: ignore[arg-type]
    within = 1.0
    if q.count_margin is not None and q.binomial:
        kind["margin"] = q.count_margin
        within = within_margin_p((int(events_a), n_a), (int(events_b), n_b), q.count_margin)
    if events_a + events_b == 0:
        if q.count_margin is None:
            why = "no event on either side: nothing to compare"
            return _Test(diffs, None, None, None, why, **kind, ratio=ratio)  # type: ignore[arg-type]
        return _Test(diffs, 1.0, within, None, "", **kind, ratio=ratio)  # type: ignore[arg-type]
    pair = (int(events_a), n_a), (int(events_b), n_b)
    above, below = count_p(*pair, binomial=q.binomial, factor=q.offset)
    p_two = min(1.0, 2 * min(above, below))
    return _Test(diffs, p_two, within, None, "", **kind, ratio=ratio)  # type: ignore[arg-type]


def within_margin_p(a: tuple[int, float], b: tuple[int, float], margin: float) -> float:
    """The one-sided p-value that a's rate is at least b's + `margin` (a difference of rates):
    small when a is at most b's rate plus the margin. The score test of two independent
    proportions (Farrington-Manning), which holds with no event on a side."""
    import warnings

    # loaded when a count with a margin is judged, not before (statsmodels takes seconds)
    from statsmodels.stats.proportion import test_proportions_2indep

    (events_a, n_a), (events_b, n_b) = a, b
    with warnings.catch_warnings(), np.errstate(divide="ignore", invalid="ignore"):
        # its ratio and odds-ratio side figures divide by a zero rate: not used here
        warnings.simplefilter("ignore", RuntimeWarning)
        found = test_proportions_2indep(
            events_a,
            n_a,
            events_b,
            n_b,
            value=margin,
            compare="diff",
            alternative="smaller",
            method="score",
        )
    p = float(found.pvalue)
    return p if math.isfinite(p) else 1.0


def _question_test(q: Question, max_looks: int | None) -> tuple[_Test, float]:
    """A question's test on the rounds up to its last look, and the level it spends there
    (max_looks None: one look, at the whole alpha)."""
    series = q.counts if q.counts is not None else q.pairs or {}
    rounds = sorted(series)
    if max_looks is not None and len(rounds) >= MIN_ROUNDS:
        rounds = rounds[: tested_at(len(rounds), max_looks)]
    if q.counts is not None:
        test = _count_test(q, rounds)
    else:
        pairs = [q.pairs[r] for r in rounds]  # type: ignore[index]
        logged = all(x > 0 and y > 0 for x, y in pairs)
        if logged:
            values = [math.log(x) - math.log(y) - math.log(q.offset) for x, y in pairs]
        else:  # a zero figure has no log: differences on the figures' own scale
            values = [x - y * q.offset for x, y in pairs]
        if not logged and q.band:
            test = _Test(np.array(values), None, None, None, "a zero figure has no ratio")
        else:
            scale = "log" if logged else "linear"
            test = _test(np.array(values, dtype=float), q.margin, False, q.band, scale)
    if max_looks is None:
        return test, ALPHA if test.p_sep is not None else 0.0
    return test, spent(len(rounds), max_looks)


def judge_family(
    questions: list[Question],
    *,
    alpha: float = ALPHA,
    max_looks: int | None = None,
    family: int = 0,
) -> list[Pair]:
    """Each question decided, the error controlled over them by Holm's step-down (over at
    least `family` hypotheses: a study's checks not testable count as p = 1), and over the
    looks when the rounds were raced (`max_looks`: the race's; None: one look). The pairs in
    the questions' order, `better` = a and `worse` = b whatever their order; a log pair's
    ratio and interval are a/b (the offset put back)."""
    judged = [_question_test(q, q.looks or max_looks) for q in questions]
    tests = [t for t, _ in judged]
    levels = [lvl * alpha / ALPHA for _, lvl in judged]
    pairs = _holm([(q.a, q.b) for q in questions], tests, levels, alpha, family)
    out = []
    for q, pair in zip(questions, pairs, strict=True):
        if pair.scale == "log":
            scale = q.offset
            low = pair.low * scale if pair.low is not None else None
            high = pair.high * scale if pair.high is not None else None
            pair = replace(pair, ratio=pair.ratio * scale, low=low, high=high)
        out.append(replace(pair, offset=q.offset))
    return out


POWER = 0.8  # the chance of a decision rounds_to_decide promises


def rounds_to_decide(
    pair: Pair, margin: float = MARGIN, alpha: float = ALPHA, most: int = 500, family: int = 1
) -> int | None:
    """The paired rounds a new race would need to decide this pair with 80 % power if its
    ratio and the noise of its ln ratios stay as observed: the race's budget being those
    rounds, its last look at that budget's level (`spent(n, n)`), divided by the `family`
    of pairs the rerun judges (Holm's first step, the strictest); power from the noncentral t
    (scipy). None when decided, when the noise is unknown, or past `most` (a ratio right at
    the margin's edge is never decided)."""
    if pair.state != "undecided" or not pair.sd or pair.scale != "log":
        return None
    if not math.isfinite(pair.ratio) or pair.ratio <= 0:
        return None
    distance = abs(math.log(pair.ratio / pair.offset))
    bound = math.log(1 + margin)
    # a band's "separated" is outside it: the distance past its edge
    past = distance - bound if pair.band else distance
    n = np.arange(max(MIN_ROUNDS, pair.rounds), most + 1)
    se = pair.sd / np.sqrt(n)
    df = n - 1
    level = np.array([spent(k, k, alpha) for k in n]) / max(1, family)
    two = stats.t.ppf(1 - level / 2, df)  # the separation test is two-sided
    separates = stats.nct.sf(two, df, past / se) + stats.nct.cdf(-two, df, past / se)
    one = stats.t.ppf(1 - level, df)  # TOST: two one-sided tests at the level each
    lower = stats.nct.sf(one, df, (bound - distance) / se)
    upper = stats.nct.sf(one, df, (bound + distance) / se)
    equivalent = np.clip(lower + upper - 1, 0.0, 1.0)  # both must reject
    enough = np.flatnonzero((separates >= POWER) | (equivalent >= POWER))
    return int(n[enough[0]]) if enough.size else None


def margin_deciding(
    pair: Pair, rounds: int, alpha: float = ALPHA, most: float = 0.25
) -> float | None:
    """The smallest whole-percent margin at which a new race of `rounds` paired rounds would
    decide this pair (separated, or equivalent within it) if its ratio and noise stay as
    observed: None when no margin up to `most` would, or the noise is unknown."""
    if rounds < max(MIN_ROUNDS, pair.rounds):
        return None
    for pct in range(1, round(most * 100) + 1):
        if rounds_to_decide(pair, pct / 100, alpha, most=rounds) is not None:
            return pct / 100
    return None


UNBOUNDED = 1_000.0  # an interval whose ends are this factor apart or more bounds nothing


def ratio_interval(ratio: float, low: float, high: float, digits: Callable[[float], str]) -> str:
    """`0.23× [0.11–0.48]`, or, where the interval bounds nothing (3 rounds at an α spent over
    many looks: [1.2e-10–4.4e8] in the shipped reference), `0.23× (too few rounds to bound
    it)`: true, and readable."""
    if low > 0 and high / low < UNBOUNDED:
        return f"{digits(ratio)}× [{digits(low)}–{digits(high)}]"
    return f"{digits(ratio)}× (too few rounds to bound it)"


def undecided_note(
    pair: Pair, margin: float = MARGIN, alpha: float = ALPHA, family: int = 1
) -> str | None:
    """What an undecided pair stands at and what would decide it: "uwsgi/granian 1.02×
    [0.97–1.08], ln ratios varying by 0.10: about 160 paired rounds would decide it at ±5 %;
    MARGIN=8 would decide it within the 38 rounds run" (None: decided, or not testable yet)."""
    if pair.state != "undecided" or pair.sd is None or pair.low is None or pair.high is None:
        return None
    needed = rounds_to_decide(pair, margin, alpha, family=family)
    more = f"about {needed}" if needed is not None else "more than 500"
    text = (
        f"{pair.better}/{pair.worse} "
        f"{ratio_interval(pair.ratio, pair.low, pair.high, lambda x: f'{x:.2f}')}, ln "
        f"ratios varying by {pair.sd:.2f}: {more} paired rounds would decide it at "
        f"{margin_text(margin)} (80 % power)"
    )
    wider = margin_deciding(pair, pair.rounds, alpha)
    if wider is not None and wider > margin:
        text += f"; MARGIN={wider * 100:.0f} would decide it within the {pair.rounds} rounds run"
    return text


def stop_command(
    standing: Standing,
    command: str,
    minutes_per_round: float,
    variable: str = "SERVER",
    alpha: float = ALPHA,
) -> str | None:
    """The command line that would decide what is left: `command` with the configurations
    still racing and a budget of the rounds the slowest undecided pair needs
    (`rounds_to_decide`) at `minutes_per_round`; None when done or when no estimate exists
    (a configuration without a figure, or a pair needing more than 500 rounds)."""
    if standing.done:
        return None
    # the rerun judges the adjacent pairs of those still racing: Holm over them
    family = max(1, len(standing.racing) - 1)
    needed = [
        rounds_to_decide(p, standing.margin, alpha, family=family)
        for p in standing.pairs
        if p.state == "undecided"
    ]
    if not needed or None in needed:
        return None
    racing = [c for c in standing.ranking if c in standing.racing]
    budget = math.ceil(max(needed) * minutes_per_round)  # type: ignore[type-var]
    return f"{command} {variable}={','.join(racing)} TRIALS=auto BUDGET={budget}"


def simulate_race(
    rng: np.random.Generator,
    truth: Mapping[str, float],
    sd: float,
    max_looks: int,
    round_sd: float = 0.05,
    drift: Mapping[str, float] | None = None,
) -> tuple[Standing, int]:
    """One simulated race, the harness's rule: each round every racing configuration runs once
    (log-normal noise `sd`, a shared round effect, `drift` as `simulate`'s), then judge; those
    not racing stop; it ends when done or at max_looks. The standing and the looks taken."""
    figures: dict[str, dict[int, float]] = {c: {} for c in truth}
    racing = set(truth)
    trend = drift or {}
    for look in range(1, max_looks + 1):
        shared = rng.normal(0.0, round_sd)
        for config in sorted(racing):
            moved = trend.get(config, 0.0) * look / max_looks
            noise = shared + moved + rng.normal(0.0, sd)
            figures[config][look] = truth[config] * math.exp(noise)
        standing = judge(figures, look=look, max_looks=max_looks)
        if standing.done:
            break
        racing = set(standing.racing)
    return standing, look


def simulate(
    truth: Mapping[str, float],
    sd: float,
    max_looks: int,
    reps: int,
    round_sd: float = 0.05,
    seed: int = 0,
    drift: Mapping[str, float] | None = None,
) -> tuple[dict[str, float], float, float]:
    """Races with a known truth (log-normal noise `sd` per run, a shared round effect): each
    round every racing configuration runs once, then judge; those not racing stop; the race
    ends when done or at max_looks. `drift`: a configuration's ln change over max_looks rounds
    (−0.03: 3 % slower by the end, linearly). Returns each adjacent truth pair's share of
    races ending "separated" / "equivalent" (keys "a>b:separated", …), the share of races
    done, and the median looks."""
    rng = np.random.default_rng(seed)
    outcomes: dict[str, float] = {}
    done = 0
    looks_taken = []
    for _ in range(reps):
        standing, look = simulate_race(rng, truth, sd, max_looks, round_sd, drift)
        done += standing.done
        looks_taken.append(look)
        for pair in standing.pairs:
            key = f"{pair.better}>{pair.worse}:{pair.state}"
            outcomes[key] = outcomes.get(key, 0.0) + 1 / reps
    return outcomes, done / reps, float(np.median(looks_taken))


def screen_drops(
    truth: Mapping[str, float],
    leaders: frozenset[str],
    sd: float,
    max_looks: int,
    reps: int,
    round_sd: float = 0.05,
    seed: int = 0,
) -> float:
    """The share of races in which the screen put out one of `leaders` (configurations tied
    with the best, which it must keep): every configuration run every round (log-normal noise
    `sd`, a shared round effect) up to max_looks, `screen_out` replaying every look."""
    rng = np.random.default_rng(seed)
    names = list(truth)
    centre = np.log(np.array([truth[c] for c in names]))
    # every race's figures drawn at once: the screen's looks dominate the time, not numpy
    noise = rng.normal(0.0, sd, (reps, max_looks, len(names)))
    shared = rng.normal(0.0, round_sd, (reps, max_looks, 1))
    logs = centre + noise + shared
    dropped = 0
    for race in logs:
        by_config = {c: dict(enumerate(race[:, i], 1)) for i, c in enumerate(names)}
        out = screen_out(by_config, True, max_looks)
        dropped += any(s.config in leaders for s in out)
    return dropped / reps


def _report() -> None:
    """The simulations quoted in docs/statistics.md (python -m bench.report.decision)."""
    print("A/A: one configuration raced against itself, 20 looks, round effect sd 0.05")
    for sd in (0.025, 0.05, 0.1, 0.2):
        outcomes, _, looks = simulate({"a": 1.0, "b": 1.0}, sd, 20, 400, seed=1)
        separated = sum(v for k, v in outcomes.items() if k.endswith(":separated"))
        equivalent = sum(v for k, v in outcomes.items() if k.endswith(":equivalent"))
        print(
            f"  sd {sd}: separated {separated:.1%}, equivalent {equivalent:.1%}, "
            f"median looks {looks:g}"
        )
    truth = {"granian": 1.0, "uwsgi": 1.0, "uvicorn": 0.72, "gunicorn-sync": 0.54}
    print("\n4 servers at 1.00, 1.00, 0.72, 0.54, 20 looks")
    for sd in (0.025, 0.05):
        outcomes, done, looks = simulate(truth, sd, 20, 200, seed=2)
        tie = sum(
            v for k, v in outcomes.items() if "granian" in k and "uwsgi" in k and "equiv" in k
        )
        print(
            f"  sd {sd}: all decided {done:.0%} (median looks {looks:g}); tied pair "
            f"equivalent {tie:.0%}"
        )


if __name__ == "__main__":  # python -m bench.report.decision
    _report()
