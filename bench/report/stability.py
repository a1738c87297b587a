"""Stability warnings, as pyperf's `check` gives them: points whose trials disagree too much.

Input: records (the ok trials of each point, bench.report.groups). Output: an `Unstable` per
point that passes a threshold (which warnings, with the figures behind them), the summary's
short "Unstable points" lines and the detail file's table.

What was taken from pyperf (`pyperf check`, pyperf/_cli.py format_checks): it warns "the
benchmark result may be unstable" when the standard deviation is 10 % of the mean or more, and
when the minimum or maximum lies far from the mean (an outlier value). Here the values are a
point's trials (one run each), on the log scale every interval of bench.report.stats uses:
- spread: the standard deviation of ln(figure) over the trials is 0.10 or more (about a 10 %
  coefficient of variation, pyperf's threshold; TRIALS=5 was sized for a noise of 0.10, so a
  point past it needs more trials than were run to separate a 30 % difference);
- outlier: one trial 25 % or more from the point's geometric mean (pyperf's older limit for
  its minimum/maximum check; 2.5 sd at the noise above, so rare on a quiet machine);
- drift: the trials, in the order they started, move one way only (each later than the one
  before) by 10 % or more in total from the first to the last, over 3 trials or more. With
  servers shuffled per round the machine, not the server, drifts: a quiet machine's trials
  rise and fall; a warming or throttling one slides. pyperf has no drift check (its runs are
  seconds apart); the 10 % is its spread threshold, so a drift counts when it is as large as
  the spread pyperf would warn about.
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

from bench.core.record import Record
from bench.report.groups import groups, is_experiment, rps_values
from bench.report.table import markdown_table

SPREAD_MAX = 0.10  # sd of ln(figure) over trials: pyperf's 10 % of the mean
OUTLIER_MAX = 0.25  # one trial this far from the geometric mean: pyperf's min/max check
DRIFT_MAX = 0.10  # a one-way slide from the first trial to the last, as large as the spread
DRIFT_MIN_TRIALS = 3  # two trials always move one way: no trend can be told from them
SHOWN = 6  # points named in the summary line; the rest in the detail file


@dataclass(frozen=True)
class Unstable:
    """A point that failed a check: its label, the figure checked, and the warnings."""

    label: str
    metric: str
    trials: int
    spread: float | None  # sd of ln(figure)
    drift: float | None  # ln(last / first) when the trials moved one way, else None
    warnings: tuple[str, ...]


def spread_of(values: Sequence[float]) -> float | None:
    """The standard deviation of ln(values) (None with fewer than 2 positive values)."""
    logs = [math.log(v) for v in values if v is not None and v > 0]
    return float(np.std(logs, ddof=1)) if len(logs) >= 2 else None


def drift_of(values_in_start_order: Sequence[float]) -> float | None:
    """ln(last / first) when every trial moved the same way as the one before it (3 or more
    trials); None when they rose and fell, or too few to tell."""
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
    spread, drift = spread_of(values), drift_of(values)
    warnings = []
    if spread is not None and spread >= SPREAD_MAX:
        warnings.append(f"sd of ln {spread:.2f}")
    if len(values) >= 2:
        center = math.exp(sum(math.log(v) for v in values) / len(values))
        worst = max(values, key=lambda v: abs(v / center - 1))
        if abs(worst / center - 1) >= OUTLIER_MAX:
            warnings.append(f"a trial {worst / center - 1:+.0%} off the mean")
    if drift is not None and abs(drift) >= DRIFT_MAX:
        warnings.append(f"drift {math.expm1(drift):+.0%} first to last")
    return spread, drift, warnings


def _label(rec: Record) -> str:
    via = f" via {rec.proxy}" if rec.proxy else ""
    return f"{rec.server}{via} {rec.scenario} c{rec.concurrency}"


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
                Unstable(_label(ordered[0]), "req/s", len(values), spread, drift, tuple(warnings))
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
        f"these ran (sd of ln req/s over trials ≥ {SPREAD_MAX:.2f}, a trial ≥ {OUTLIER_MAX:.0%} "
        f"off the mean, or a one-way drift ≥ {DRIFT_MAX:.0%}; pyperf's thresholds): "
        f"their intervals are wide and their ranks less certain; rerun them on a quieter "
        f"machine. [Which and why]({detail}).",
        "",
    ]


HEADER = ["point", "figure", "trials", "spread (sd of ln)", "drift first→last", "warnings"]


def detail_lines(unstable: list[Unstable]) -> list[str]:
    """The detail file's body: the thresholds and a row per unstable point."""
    rows = [
        [
            u.label,
            u.metric,
            str(u.trials),
            f"{u.spread:.3f}" if u.spread is not None else "–",
            f"{math.expm1(u.drift):+.1%}" if u.drift is not None else "–",
            "; ".join(u.warnings),
        ]
        for u in unstable
    ]
    return [
        "## Unstable points",
        "",
        f"Thresholds (pyperf's `check`): the sd of ln(figure) over trials ≥ {SPREAD_MAX:.2f} "
        f"(about {SPREAD_MAX:.0%} of the mean); a trial ≥ {OUTLIER_MAX:.0%} from the geometric "
        f"mean; trials that move one way only, in start order, by ≥ {DRIFT_MAX:.0%} from the "
        f"first to the last ({DRIFT_MIN_TRIALS}+ trials). The figure is req/s of closed-loop "
        "points (fixed-rate points are not checked).",
        "",
        *markdown_table(HEADER, rows, "llrrrl"),
        "",
    ]
