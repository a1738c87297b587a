"""Stability warnings, as pyperf's `check` gives them: points whose trials disagree too much.

Input: records (the ok trials of each point, bench.report.groups). Output: an `Unstable` per
point that passes a threshold (which warnings, with the figures behind them), the summary's
short "Unstable points" lines and the detail file's table.

What was taken from pyperf (`pyperf check`, pyperf/_cli.py format_checks): it warns "the
benchmark result may be unstable" when the standard deviation is 10 % of the mean or more, and
when the minimum or maximum lies far from the mean (an outlier value). Here the values are a
point's trials (one run each), on the log scale every interval of bench.report.stats uses, and
each rule is calibrated so that a quiet point is rarely flagged: pyperf's runs have dozens of
values, a point here 3 to 5, and the sample sd of 3 trials at a quiet noise of 0.07 passes
0.10 in 13 % of points (with the drift rule below at 3 trials, 29 % were flagged):
- spread: the one-sided 95 % lower confidence bound of the standard deviation of ln(figure)
  over the trials (chi-square, n − 1 degrees of freedom) is 0.10 or more (about a 10 %
  coefficient of variation, pyperf's threshold): the noise is shown to be past it, not just
  estimated there. A point whose true sd is 0.10 is flagged in 5 % of cases, a quieter one
  less (sd 0.07, 3 trials: 0.2 %); 3 trials need a sample sd of 0.17 to be flagged;
- outlier: one trial 25 % or more from the point's geometric mean (pyperf's older limit for
  its minimum/maximum check; about 3 sd of a trial's deviation at the noise above, so rare
  on a quiet machine: under 1 % of 3- to 5-trial points at sd 0.07);
- drift: the trials, in the order they started, move one way only (each later than the one
  before) by 10 % or more in total from the first to the last, over 5 trials or more. Trials
  of a quiet machine are exchangeable, so they come out in one monotone order with chance
  2/n!: 33 % at 3 trials, 8 % at 4, 1.7 % at 5, hence 5 (the one-way order is the test, the
  10 % its size: a drift counts when it is as large as the spread pyperf would warn about).
The figure is req/s of closed-loop points. Fixed-rate points are not checked: their achieved
req/s is the load tool's pacing, and their p99 near a server's knee (capacity steps) swings by
design, a fact about the server, not the machine. Experiments (reloads, quotas, soaks) disturb
the server on purpose and are not checked either.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from bench.core.record import Record
from bench.report.cells import knobs_label
from bench.report.groups import groups, is_experiment, rps_values
from bench.report.table import markdown_table

SPREAD_MAX = 0.10  # sd of ln(figure) over trials: pyperf's 10 % of the mean
SPREAD_CONFIDENCE = 0.95  # the sd's lower bound at this one-sided confidence must pass it
OUTLIER_MAX = 0.25  # one trial this far from the geometric mean: pyperf's min/max check
DRIFT_MAX = 0.10  # a one-way slide from the first trial to the last, as large as the spread
DRIFT_MIN_TRIALS = 5  # n exchangeable trials come out monotone with chance 2/n!: 1.7 % at 5
SHOWN = 6  # points named in the summary line; the rest in the detail file


@dataclass(frozen=True)
class Unstable:
    """A point that failed a check: its label, the figure checked, and the warnings."""

    label: str
    metric: str
    trials: int
    spread: float | None  # sd of ln(figure)
    spread_low: float | None  # its one-sided 95 % lower confidence bound
    drift: float | None  # ln(last / first) when the trials moved one way, else None
    warnings: tuple[str, ...]


def spread_of(values: Sequence[float]) -> float | None:
    """The standard deviation of ln(values) (None with fewer than 2 positive values)."""
    logs = [math.log(v) for v in values if v is not None and v > 0]
    return float(np.std(logs, ddof=1)) if len(logs) >= 2 else None


def spread_bound(values: Sequence[float]) -> float | None:
    """The one-sided lower confidence bound of the sd of ln(values): s·√((n − 1)/χ²(n − 1))
    at the SPREAD_CONFIDENCE quantile (None with fewer than 2 positive values)."""
    spread = spread_of(values)
    if spread is None:
        return None
    df = sum(1 for v in values if v is not None and v > 0) - 1
    return spread * math.sqrt(df / float(stats.chi2.ppf(SPREAD_CONFIDENCE, df)))


def drift_of(values_in_start_order: Sequence[float]) -> float | None:
    """ln(last / first) when every trial moved the same way as the one before it
    (DRIFT_MIN_TRIALS or more trials); None when they rose and fell, or too few to tell."""
    values = [v for v in values_in_start_order if v is not None and v > 0]
    if len(values) < DRIFT_MIN_TRIALS:
        return None
    steps = [b - a for a, b in itertools.pairwise(values)]
    if not (all(s > 0 for s in steps) or all(s < 0 for s in steps)):
        return None
    return math.log(values[-1] / values[0])


def check(values_in_start_order: Sequence[float]) -> tuple[float | None, float | None, list[str]]:
    """(spread, drift, warnings) of one point's trials, in the order they started."""
    values = [v for v in values_in_start_order if v is not None and v > 0]
    spread, drift, bound = spread_of(values), drift_of(values), spread_bound(values)
    warnings = []
    if bound is not None and bound >= SPREAD_MAX:
        warnings.append(f"sd of ln {spread:.2f} (≥ {bound:.2f} at 95 %)")
    if len(values) >= 2:
        center = math.exp(sum(math.log(v) for v in values) / len(values))
        worst = max(values, key=lambda v: abs(v / center - 1))
        if abs(worst / center - 1) >= OUTLIER_MAX:
            warnings.append(f"a trial {worst / center - 1:+.0%} off the mean")
    if drift is not None and abs(drift) >= DRIFT_MAX:
        warnings.append(f"drift {math.expm1(drift):+.0%} first to last")
    return spread, drift, warnings


def _label(rec: Record) -> str:
    """A point as the reader tells it from the others: the server with its knobs, the
    proxy, route and load, and the study or make tune that ran it (the AMD summary listed
    "gunicorn-gthread compute c16" four times: four knob sets of one study)."""
    via = f" via {rec.proxy}" if rec.proxy else ""
    server = f"{rec.server} {knobs_label(rec.knobs or {})}".strip()
    where = rec.metadata.get("study") or ("make tune" if "tune" in rec.metadata else None)
    of = f" ({where})" if where else ""
    return f"{server}{via} {rec.scenario} c{rec.concurrency}{of}"


def unstable_points(records: Iterable[Record]) -> list[Unstable]:
    """Every steady point (2 trials or more) that passes a threshold, worst spread first."""
    found = []
    for group in groups(records).values():
        if len(group) < 2 or is_experiment(group[0]) or group[0].offered_rps is not None:
            continue
        ordered = sorted(group, key=lambda r: str(r.metadata.get("started_at", "")))
        values = rps_values(ordered)
        spread, drift, warnings = check(values)
        if warnings:
            found.append(
                Unstable(
                    _label(ordered[0]),
                    "req/s",
                    len(values),
                    spread,
                    spread_bound(values),
                    drift,
                    tuple(warnings),
                )
            )
    return sorted(found, key=lambda u: (-(u.spread or 0.0), u.label))


def summary_lines(unstable: list[Unstable], detail: str) -> list[str]:
    """The summary's warning (empty when every point is stable): the points, the claim that
    the machine was unstable, the link to the detail."""
    if not unstable:
        return []
    names = ", ".join(f"{u.label} ({u.warnings[0]})" for u in unstable[:SHOWN])
    more = f" and {len(unstable) - SHOWN} more" if len(unstable) > SHOWN else ""
    return [
        f"**Unstable points** ({len(unstable)}): {names}{more}. The machine was unstable while "
        f"these ran (sd of ln req/s over trials ≥ {SPREAD_MAX:.2f} at 95 % confidence, a trial "
        f"≥ {OUTLIER_MAX:.0%} off the mean, or a one-way drift ≥ {DRIFT_MAX:.0%} over "
        f"{DRIFT_MIN_TRIALS}+ trials; pyperf's thresholds): "
        f"their intervals are wide and their ranks less certain; rerun them on a quieter "
        f"machine. [Which and why]({detail}).",
        "",
    ]


HEADER = [
    "point",
    "figure",
    "trials",
    "spread (sd of ln, 95 % lower bound)",
    "drift first→last",
    "warnings",
]


def detail_lines(unstable: list[Unstable]) -> list[str]:
    """The detail file's body: the thresholds and a row per unstable point."""
    rows = [
        [
            u.label,
            u.metric,
            str(u.trials),
            f"{u.spread:.3f} (≥ {u.spread_low:.3f})"
            if u.spread is not None and u.spread_low is not None
            else "–",
            f"{math.expm1(u.drift):+.1%}" if u.drift is not None else "–",
            "; ".join(u.warnings),
        ]
        for u in unstable
    ]
    return [
        "## Unstable points",
        "",
        f"Thresholds (pyperf's `check`): the sd of ln(figure) over trials ≥ {SPREAD_MAX:.2f} "
        f"(about {SPREAD_MAX:.0%} of the mean) at its one-sided 95 % lower confidence bound "
        f"(chi-square), so a quiet point is flagged rarely; a trial ≥ {OUTLIER_MAX:.0%} from "
        "the geometric "
        f"mean; trials that move one way only, in start order, by ≥ {DRIFT_MAX:.0%} from the "
        f"first to the last ({DRIFT_MIN_TRIALS}+ trials). The figure is req/s of closed-loop "
        "points (fixed-rate points are not checked).",
        "",
        *markdown_table(HEADER, rows, "llrrrl"),
        "",
    ]
