"""This machine's noise: variance components of ln req/s from `make noise`'s nested design,
the race's A/A result, and how the workers shared the server's CPU.

Input: records of `make noise` (metadata.noise: the invocation's id, round, start and design;
resources.worker_cpu_s: each worker's CPU seconds over the run). Output: Components (the
variance of ln req/s between runs within a server start, between starts within a round and
between rounds, each with its 95 % interval), the A/A race's verdict (the same server as two
configurations, its two starts of each round, judged by bench.report.decision), the
worker-share imbalance per run and start beside req/s, and their renderings: the summary's
"This machine's noise", details/noise.md and the command's stdout.

Method (docs/statistics.md, "This machine's noise"): a two-level nested random-effects
ANOVA by the method of moments (Searle's expected mean squares, unbalanced designs too).
Intervals for a balanced design only: the run component's exact chi-square interval; the
start and round components, differences of two mean squares, by the modified large-sample
method of Ting et al. (1990), which keeps close to its level where Satterthwaite's does not.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
from scipy import stats

from bench.core.record import Record
from bench.report import decision
from bench.report.cells import host_of
from bench.report.table import markdown_table

LEVEL = 0.95
# Runs whose starts are closer than this are "seconds apart" (issue 30: r = 0.32 among them).
CLOSE_S = 10.0
# The A/A race's two configurations: the first and the second start of each round.
AA = ("A", "A′")
DETAILS_FILE = "noise.md"

Cells = Mapping[tuple[int, int], Sequence[float]]  # (round, start) -> ln req/s of its runs


def is_noise(rec: Record) -> bool:
    """A run of `make noise` (never a trial of a bench point)."""
    return isinstance(rec.metadata.get("noise"), dict)


@dataclass(frozen=True)
class Component:
    """One variance component of ln req/s: its estimate (method of moments, floored at 0)
    and its 95 % interval (None where the design gives none)."""

    name: str
    variance: float
    low: float | None
    high: float | None
    df: int

    @property
    def sd(self) -> float:
        """The component's standard deviation: about the relative spread it adds (0.025: ±2.5 %)."""
        return math.sqrt(self.variance)

    def sd_text(self) -> str:
        """ "0.025 [0.018–0.040]" (95 % interval of the sd), or the estimate alone."""
        if self.low is None or self.high is None:
            return f"{self.sd:.3f}"
        return f"{self.sd:.3f} [{math.sqrt(self.low):.3f}–{math.sqrt(self.high):.3f}]"


@dataclass(frozen=True)
class Components:
    """The nested ANOVA of one design: components run < start < round, and its table."""

    run: Component | None
    start: Component | None
    round: Component | None
    balanced: bool
    rounds: int
    starts: int
    runs: int
    table: tuple[tuple[str, float, int, float], ...]  # (source, SS, df, MS)

    def present(self) -> list[Component]:
        """The components the design could estimate, run first."""
        return [c for c in (self.run, self.start, self.round) if c is not None]


@functools.lru_cache(maxsize=256)
def _chi2_bounds(df: int, level: float) -> tuple[float, float]:
    """(lower, upper) quantiles of chi-square on df at the two-sided level (cached: a
    simulation asks the same few)."""
    alpha = 1 - level
    return float(stats.chi2.ppf(alpha / 2, df)), float(stats.chi2.ppf(1 - alpha / 2, df))


@functools.lru_cache(maxsize=256)
def _mls_constants(df1: int, df2: int, level: float) -> tuple[float, ...]:
    """G1, H1, G2, H2, G12, H12 of the modified large-sample interval."""
    alpha = 1 - level
    low1, up1 = _chi2_bounds(df1, level)
    low2, up2 = _chi2_bounds(df2, level)
    g1, h1 = 1 - df1 / up1, df1 / low1 - 1
    g2, h2 = 1 - df2 / up2, df2 / low2 - 1
    f_up = float(stats.f.ppf(1 - alpha / 2, df1, df2))
    f_low = float(stats.f.ppf(alpha / 2, df1, df2))
    g12 = ((f_up - 1) ** 2 - g1**2 * f_up**2 - h2**2) / f_up
    h12 = ((1 - f_low) ** 2 - h1**2 * f_low**2 - g2**2) / f_low
    return g1, h1, g2, h2, g12, h12


def chi2_interval(ms: float, df: int, level: float = LEVEL) -> tuple[float, float]:
    """The exact interval of a variance from its mean square on df degrees of freedom."""
    low, up = _chi2_bounds(df, level)
    return df * ms / up, df * ms / low


def mls_interval(
    c1: float, ms1: float, df1: int, c2: float, ms2: float, df2: int, level: float = LEVEL
) -> tuple[float, float]:
    """The interval of c1·ms1 − c2·ms2 (c1, c2 > 0), the modified large-sample method
    (Ting, Burdick, Graybill, Jeyaratnam and Lu 1990; Burdick and Graybill 1992, §3.3),
    the lower end floored at 0 (a variance)."""
    g1, h1, g2, h2, g12, h12 = _mls_constants(df1, df2, level)
    a, b = c1 * ms1, c2 * ms2
    theta = a - b
    low = theta - math.sqrt(max(g1**2 * a**2 + h2**2 * b**2 + g12 * a * b, 0.0))
    high = theta + math.sqrt(max(h1**2 * a**2 + g2**2 * b**2 + h12 * a * b, 0.0))
    return max(low, 0.0), max(high, 0.0)


def components(cells: Cells, level: float = LEVEL) -> Components:
    """Variance components of ln req/s between runs (within a start), starts (within a
    round) and rounds, from the runs of each (round, start) cell; ValueError without two
    runs in all."""
    groups: dict[int, dict[int, np.ndarray]] = defaultdict(dict)
    for (rnd, start), values in sorted(cells.items()):
        if len(values):
            groups[rnd][start] = np.asarray(values, dtype=float)
    starts = [cell for per_round in groups.values() for cell in per_round.values()]
    total = sum(len(c) for c in starts)
    if total < 2:
        raise ValueError("fewer than two measured runs: no variance to split")
    grand = np.concatenate(starts).mean()
    n_i = {r: sum(len(c) for c in per.values()) for r, per in groups.items()}
    mean_i = {r: np.concatenate(list(per.values())).mean() for r, per in groups.items()}
    ss_run = sum(float(((c - c.mean()) ** 2).sum()) for c in starts)
    ss_start = sum(
        len(c) * (c.mean() - mean_i[r]) ** 2 for r, per in groups.items() for c in per.values()
    )
    ss_round = sum(n_i[r] * (mean_i[r] - grand) ** 2 for r in groups)
    df_run, df_start, df_round = total - len(starts), len(starts) - len(groups), len(groups) - 1
    ms = {
        name: ss / df if df else 0.0
        for name, ss, df in (
            ("run", ss_run, df_run),
            ("start", ss_start, df_start),
            ("round", ss_round, df_round),
        )
    }
    sizes = {len(c) for c in starts}
    per_round = {len(per) for per in groups.values()}
    balanced = len(sizes) == 1 and len(per_round) == 1
    # Searle's coefficients of the expected mean squares (K, K and S·K when balanced).
    within = sum(sum(len(c) ** 2 for c in per.values()) / n_i[r] for r, per in groups.items())
    k1 = (total - within) / df_start if df_start else 0.0
    k2 = (within - sum(len(c) ** 2 for c in starts) / total) / df_round if df_round else 0.0
    k3 = (total - sum(n**2 for n in n_i.values()) / total) / df_round if df_round else 0.0
    df = {"run": df_run, "start": df_start, "round": df_round}
    run = (
        Component("run", ms["run"], *chi2_interval(ms["run"], df_run, level), df_run)
        if df_run
        else None
    )
    start = _start_component(ms, df, k1, balanced, level)
    rnd = _round_component(ms, df, (k1, k2, k3), balanced, level)
    table = (
        ("rounds", ss_round, df_round, ms["round"]),
        ("starts within a round", ss_start, df_start, ms["start"]),
        ("runs within a start", ss_run, df_run, ms["run"]),
    )
    return Components(
        run,
        start,
        rnd,
        balanced,
        len(groups),
        len(starts),
        total,
        tuple((name, float(ss), df, float(m)) for name, ss, df, m in table),
    )


def _start_component(
    ms: dict[str, float], df: dict[str, int], k1: float, balanced: bool, level: float
) -> Component | None:
    """Between starts within a round (None: one start per round)."""
    if df["start"] and k1 and df["run"]:
        est = max((ms["start"] - ms["run"]) / k1, 0.0)
        bounds: tuple[float | None, float | None] = (
            mls_interval(1 / k1, ms["start"], df["start"], 1 / k1, ms["run"], df["run"], level)
            if balanced
            else (None, None)
        )
        return Component("start", est, *bounds, df["start"])
    if df["start"] and not df["run"]:
        # One run per start: a start's effect and its run's noise cannot be told apart.
        return Component(
            "start + run", ms["start"], *chi2_interval(ms["start"], df["start"]), df["start"]
        )
    return None


def _round_component(
    ms: dict[str, float],
    df: dict[str, int],
    k: tuple[float, float, float],
    balanced: bool,
    level: float,
) -> Component | None:
    """Between rounds (None: one round)."""
    k1, k2, k3 = k
    if not (df["round"] and k3):
        return None
    # The start component unfloored, so that a balanced design's estimate is exactly
    # (MS_round − MS_start) / (S·K), the difference the interval is of.
    # One run per start: the start's mean square holds the run noise too (k2 is then 1).
    with_runs = df["start"] and k1 and df["run"]
    s2_start = (ms["start"] - ms["run"]) / k1 if with_runs else ms["start"]
    error = ms["run"] if df["run"] else 0.0
    est = max((ms["round"] - error - k2 * s2_start) / k3, 0.0)
    bounds: tuple[float | None, float | None] = (None, None)
    name = "round"
    if balanced and df["start"]:
        bounds = mls_interval(
            1 / k3, ms["round"], df["round"], 1 / k3, ms["start"], df["start"], level
        )
    elif not df["start"] and df["run"]:
        # One start per round: its effect and the round's cannot be told apart.
        name = "start + round"
        if balanced:
            bounds = mls_interval(
                1 / k3, ms["round"], df["round"], 1 / k3, ms["run"], df["run"], level
            )
    return Component(name, est, *bounds, df["round"])


# -- the records of one `make noise` ----------------------------------------------------------


def _rps(rec: Record) -> float | None:
    value = rec.achieved_rps if rec.achieved_rps is not None else rec.rps
    return float(value) if value else None


def _when(rec: Record) -> float | None:
    try:
        text = str(rec.metadata.get("started_at", "")).replace("Z", "+00:00")
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None


def worker_imbalance(rec: Record) -> float | None:
    """The busiest worker's CPU share × the number of workers (1: an even spread; 2: one of
    two workers did all the work), from resources.worker_cpu_s; None without two workers."""
    seconds = sorted(((rec.resources or {}).get("worker_cpu_s") or {}).values(), reverse=True)
    workers = int((rec.knobs or {}).get("workers") or len(seconds))
    top = seconds[:workers]  # helper processes of the tree (a resource tracker) use ~nothing
    total = sum(top)
    if len(top) < 2 or total <= 0:
        return None
    return max(top) / total * len(top)


def worker_shares(rec: Record) -> list[float]:
    """Each worker's share of the workers' CPU seconds, busiest first."""
    seconds = sorted(((rec.resources or {}).get("worker_cpu_s") or {}).values(), reverse=True)
    top = seconds[: int((rec.knobs or {}).get("workers") or len(seconds))]
    total = sum(top)
    return [s / total for s in top] if total > 0 else []


@dataclass(frozen=True)
class Correlation:
    """A Pearson correlation with its p-value over n pairs."""

    r: float
    p: float
    n: int

    def text(self) -> str:
        """ "r = 0.32 (n = 24, p = 0.13)"."""
        return f"r = {self.r:+.2f} (n = {self.n}, p = {self.p:.2g})"


def correlation(xs: Sequence[float], ys: Sequence[float]) -> Correlation | None:
    """Pearson's r (scipy.stats.pearsonr); None below 3 pairs or on a constant series."""
    if len(xs) < 3 or len(set(xs)) < 2 or len(set(ys)) < 2:
        return None
    result = stats.pearsonr(xs, ys)
    return Correlation(float(result.statistic), float(result.pvalue), len(xs))


@dataclass(frozen=True)
class AAResult:
    """The A/A race: its pair's state when the race stopped, or why it was not judged."""

    state: str | None  # separated / equivalent / undecided; None: not judged
    rounds: int  # the rounds it had seen when it stopped
    line: str  # the standing's line, or the reason it was not judged
    ratio: float | None = None
    low: float | None = None
    high: float | None = None
    looks: tuple[str, ...] = ()  # each look's state, in order

    def text(self) -> str:
        """One line for the summary and stdout."""
        if self.state is None:
            return f"not judged ({self.line})"
        ratio = ""
        if self.ratio is not None:
            bounds = (
                f" [{self.low:.3f}–{self.high:.3f}]"
                if self.low is not None and self.high is not None
                else ""
            )
            ratio = f", ratio {self.ratio:.3f}{bounds}"
        return f"{self.state} after {self.rounds} round(s){ratio}"


def aa_race(cells: Cells) -> AAResult:
    """The server raced against itself: its first start of each round as A, its second as
    A′ (each start's figure: the geometric mean of its runs' req/s), judged by the race
    engine (bench.report.decision.judge, at its default margin and alpha) after each round as
    the race judges (look = rounds so far, max_looks = the design's rounds) until the pair is
    decided or the rounds run out."""
    rounds = sorted({r for (r, s) in cells if s in (1, 2)})
    figures: dict[str, dict[int, float]] = {name: {} for name in AA}
    for (rnd, start), values in cells.items():
        if start in (1, 2) and len(values):
            figures[AA[start - 1]][rnd] = math.exp(float(np.mean(values)))
    if not figures[AA[1]]:
        return AAResult(None, 0, "one start per round: STARTS=2 or more races A against A′")
    looks: list[str] = []
    standing = None
    for look, last in enumerate(rounds, start=1):
        seen = {name: {r: v for r, v in per.items() if r <= last} for name, per in figures.items()}
        standing = decision.judge(seen, higher_is_better=True, look=look, max_looks=len(rounds))
        looks.append(standing.pairs[0].state if standing.pairs else "undecided")
        if standing.done:
            break
    assert standing is not None
    pair = standing.pairs[0] if standing.pairs else None
    if pair is None:
        return AAResult("undecided", len(looks), standing.line(), looks=tuple(looks))
    return AAResult(
        pair.state, len(looks), standing.line(), pair.ratio, pair.low, pair.high, tuple(looks)
    )


@dataclass
class NoiseRun:
    """The records of one `make noise` invocation and what they give."""

    records: list[Record]
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def measured(self) -> list[Record]:
        """Its ok runs, the warm-up start's left out (a server's first start reads slow)."""
        return [
            r
            for r in self.records
            if r.status == "ok" and not r.metadata["noise"].get("warmup") and _rps(r)
        ]

    def cells(self) -> dict[tuple[int, int], list[float]]:
        """(round, start) -> ln req/s of its runs, in the order they ran."""
        out: dict[tuple[int, int], list[float]] = defaultdict(list)
        for rec in sorted(self.measured, key=lambda r: _when(r) or 0.0):
            noise = rec.metadata["noise"]
            out[(int(noise["round"]), int(noise["start"]))].append(math.log(_rps(rec) or 1.0))
        return dict(out)

    def close_pairs(self) -> Correlation | None:
        """Runs started < CLOSE_S apart, one after the other: the correlation of their
        ln req/s deviations from the design's mean (the start's and round's effects, which
        such a pair shares, included)."""
        timed = sorted(
            (t, math.log(_rps(r) or 1.0)) for r in self.measured if (t := _when(r)) is not None
        )
        if len(timed) < 2:
            return None
        mean = float(np.mean([y for _, y in timed]))
        pairs = [
            (a - mean, b - mean)
            for (ta, a), (tb, b) in itertools.pairwise(timed)
            if tb - ta < CLOSE_S
        ]
        return correlation([a for a, _ in pairs], [b for _, b in pairs])

    def start_rows(self) -> list[tuple[int, int, list[float], float, float | None, list[float]]]:
        """Per start: round, start, its runs' req/s, their geometric mean, the mean worker
        imbalance of its runs, the workers' mean shares."""
        by_start: dict[tuple[int, int], list[Record]] = defaultdict(list)
        for rec in sorted(self.measured, key=lambda r: _when(r) or 0.0):
            noise = rec.metadata["noise"]
            by_start[(int(noise["round"]), int(noise["start"]))].append(rec)
        rows = []
        for (rnd, start), recs in sorted(by_start.items()):
            rps = [_rps(r) or 0.0 for r in recs]
            imb = [v for r in recs if (v := worker_imbalance(r)) is not None]
            shares = [worker_shares(r) for r in recs]
            width = min((len(s) for s in shares), default=0)
            mean_shares = [float(np.mean([s[i] for s in shares])) for i in range(width)]
            gm = math.exp(float(np.mean(np.log(rps))))
            rows.append((rnd, start, rps, gm, float(np.mean(imb)) if imb else None, mean_shares))
        return rows

    def imbalance_by_run(self) -> Correlation | None:
        """Worker imbalance against ln req/s, over runs."""
        pairs = [
            (v, math.log(_rps(r) or 1.0))
            for r in self.measured
            if (v := worker_imbalance(r)) is not None
        ]
        return correlation([a for a, _ in pairs], [b for _, b in pairs])

    def imbalance_by_start(self) -> Correlation | None:
        """Each start's mean worker imbalance against its geometric-mean req/s."""
        rows = [(imb, math.log(gm)) for _, _, _, gm, imb, _ in self.start_rows() if imb is not None]
        return correlation([a for a, _ in rows], [b for _, b in rows])


def noise_runs(records: Sequence[Record]) -> list[NoiseRun]:
    """Every `make noise` invocation among records, oldest first."""
    by_id: dict[str, list[Record]] = defaultdict(list)
    for rec in records:
        if is_noise(rec):
            by_id[str(rec.metadata["noise"].get("id"))].append(rec)
    runs = [NoiseRun(recs, dict(recs[0].metadata["noise"])) for recs in by_id.values()]
    return sorted(runs, key=lambda n: min(str(r.metadata.get("started_at", "")) for r in n.records))


def _describe(run: NoiseRun) -> str:
    first = run.records[0]
    design = run.meta.get("design") or {}
    return (
        f"{first.server} /{first.scenario} c={first.concurrency} on {host_of(first)}, "
        f"{design.get('rounds', '?')} rounds × {design.get('starts', '?')} starts × "
        f"{design.get('runs', '?')} runs of {first.duration_s:g} s "
        f"(started {first.metadata.get('started_at', '?')})"
    )


def _component_phrase(comps: Components) -> str:
    names = {
        "run": "between runs of one start",
        "start": "between server starts within a round",
        "start + run": "between starts (one run each: with the run noise)",
        "round": "between rounds",
        "start + round": "between starts (one a round: with the round effect)",
    }
    return "; ".join(f"{names[c.name]} {c.sd_text()}" for c in comps.present())


@dataclass(frozen=True)
class Findings:
    """What one noise run gives, each part None where it could not be computed (and why)."""

    run: NoiseRun
    components: Components | None
    problem: str | None
    aa: AAResult
    close: Correlation | None
    by_run: Correlation | None
    by_start: Correlation | None


def findings(run: NoiseRun) -> Findings:
    """Components, the A/A race and the correlations of one noise run."""
    cells = run.cells()
    try:
        comps, problem = components(cells), None
    except ValueError as exc:
        comps, problem = None, str(exc)
    return Findings(
        run,
        comps,
        problem,
        aa_race(cells),
        run.close_pairs(),
        run.imbalance_by_run(),
        run.imbalance_by_start(),
    )


def shared_correlation(comps: Components) -> float | None:
    """The correlation the components imply between two runs of one start (they share its
    start and round effects): (σ²_start + σ²_round) / (σ²_start + σ²_round + σ²_run)."""
    if comps.run is None or comps.start is None:
        return None
    shared = comps.start.variance + (comps.round.variance if comps.round else 0.0)
    total = shared + comps.run.variance
    return shared / total if total > 0 else None


def short_lines(found: Findings) -> list[str]:
    """The answer in a few lines: the summary's section body and the command's stdout."""
    run = found.run
    lines = [f"{_describe(run)}: {len(run.measured)} runs measured."]
    if found.components is None:
        lines.append(f"- variance components: not computed ({found.problem})")
    else:
        lines.append(f"- sd of ln req/s (95 % interval): {_component_phrase(found.components)}")
    lines.append(f"- A/A race (its two starts of each round as A and A′): {found.aa.text()}")
    if found.close is not None:
        shared = shared_correlation(found.components) if found.components else None
        expected = (
            f"; the components' correlation of two runs of one start: {shared:.2f}"
            if shared is not None
            else ""
        )
        lines.append(f"- runs started < {CLOSE_S:g} s apart: {found.close.text()}{expected}")
    if found.by_start is not None:
        lines.append(
            f"- worker-CPU imbalance vs req/s, per start: {found.by_start.text()}"
            + (f"; per run: {found.by_run.text()}" if found.by_run is not None else "")
        )
    return lines


SUMMARY_TITLE = "## This machine's noise"


def summary_lines(records: Sequence[Record], link: str) -> list[str]:
    """summary.md's "This machine's noise": the latest noise run per machine (none: no lines)."""
    latest: dict[str, NoiseRun] = {}
    for run in noise_runs(records):
        latest[host_of(run.records[0])] = run
    if not latest:
        return []
    lines = [SUMMARY_TITLE, ""]
    for run in latest.values():
        lines += [*short_lines(findings(run)), ""]
    return [*lines, f"Each start, the ANOVA and the method: [{DETAILS_FILE}]({link}).", ""]


NOTE = (
    "ln req/s = within-start run noise + start effect + round effect + the design's mean, "
    "each effect random (a nested random-effects ANOVA, method of moments; Searle's "
    "coefficients when runs failed). An sd of ln req/s is about a relative spread: 0.025 is "
    "±2.5 %. Intervals (95 %): the run component's exact chi-square interval; the start and "
    "round components by the modified large-sample method (Ting et al. 1990), given for a "
    "balanced design only. The warm-up start (round 0: a server's first start reads slow) is "
    "recorded and left out. The A/A race judges the server against itself with the race "
    "engine (bench.report.decision): the first start of each round is A, the second A′, "
    "each start's figure the geometric mean of its runs; it must not come out 'separated'. "
    "Worker imbalance: the busiest worker's share of the workers' CPU seconds × the number "
    "of workers (1: an even spread); keep-alive connections stay on the worker that accepted "
    "them, so an uneven spread lasts the whole run."
)


def detail_lines(records: Sequence[Record]) -> list[str]:
    """details/noise.md: per noise run (latest first), the answer, the ANOVA, each start."""
    runs = noise_runs(records)
    if not runs:
        return []
    lines = [NOTE, ""]
    for run in reversed(runs):
        found = findings(run)
        lines += [f"## {_describe(run)}", "", *short_lines(found)[1:], ""]
        if found.components is not None:
            comps = found.components
            rows = [[c.name, f"{c.variance:.6f}", c.sd_text(), str(c.df)] for c in comps.present()]
            lines += [
                *markdown_table(["component", "variance", "sd [95 %]", "df"], rows, "lrrr"),
                "",
                *markdown_table(
                    ["source", "SS", "df", "MS"],
                    [[s, f"{ss:.6f}", str(df), f"{ms:.6f}"] for s, ss, df, ms in comps.table],
                    "lrrr",
                ),
                "",
            ]
            if not comps.balanced:
                lines += ["Unbalanced (some runs failed): estimates without intervals.", ""]
        if found.aa.looks:
            lines += [f"A/A looks: {', '.join(found.aa.looks)}; standing: {found.aa.line}", ""]
        rows = [
            [
                str(rnd),
                str(start),
                ", ".join(f"{v:,.0f}" for v in rps),
                f"{gm:,.0f}",
                "–" if imb is None else f"{imb:.2f}",
                " / ".join(f"{s:.0%}" for s in shares) or "–",
            ]
            for rnd, start, rps, gm, imb, shares in run.start_rows()
        ]
        lines += [
            *markdown_table(
                ["round", "start", "req/s of its runs", "geo. mean", "imbalance", "worker shares"],
                rows,
                "rrrrrl",
            ),
            "",
        ]
    return lines
