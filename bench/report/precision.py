"""Precision of each point and TRIALS=auto's stopping rule.

Input: records (or each point's per-trial figures), the trials run so far, the time spent,
and the Precision settings (bench.core.plan). Output: a point's relative half-width, the
decision after a round ("precision", "budget", "limit" or None: run another round), and the
summary's line saying which points reached the target.

The rule stops on precision, never on a p-value: stopping when two servers look different
would make "significant" more likely than its 5 % (optional stopping); stopping when every
interval is narrow enough leaves the test as calibrated as with fixed trials. The half-width is
that of the interval bench.report.stats prints (Student's t on ln req/s), as a share of the
geometric mean: exp(t·se) − 1, the upper half, the wider one. The figure is req/s of
closed-loop points, p99 at a fixed offered rate (achieved req/s there is the load tool's pacing).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

from bench.core.plan import Precision
from bench.core.record import Record
from bench.report.groups import groups, is_experiment, latency_values, rps_values
from bench.report.stats import estimate


def half_width(values: Sequence[float]) -> float | None:
    """The 95 % interval's upper half-width as a share of the geometric mean (None: fewer than
    2 trials or a figure of zero)."""
    est = estimate(values)
    if est is None or est.low is None or est.high is None or est.center <= 0:
        return None
    return est.high / est.center - 1


def reached(values: Sequence[float], target: float) -> bool:
    """Whether the point's interval is within ±target."""
    width = half_width(values)
    return width is not None and width <= target


def next_round(
    trials_done: int,
    figures: Mapping[object, Sequence[float]],
    elapsed_s: float,
    round_s: float,
    settings: Precision,
) -> str | None:
    """After a round: None to run another; else why to stop: "precision" (every point within
    the target), "limit" (the trials' cap) or "budget" (another round of `round_s` would end
    past the budget). Never before settings.min_trials rounds, whatever the budget says."""
    if trials_done < settings.min_trials:
        return None
    if figures and all(reached(v, settings.target) for v in figures.values()):
        return "precision"
    if trials_done >= settings.max_trials:
        return "limit"
    if elapsed_s + round_s > settings.budget_s:
        return "budget"
    return None


def _label(rec: Record) -> str:
    load = f"{rec.offered_rps:g} req/s" if rec.offered_rps is not None else f"c{rec.concurrency}"
    return f"{rec.server} {rec.scenario} {load}"


def point_figures(records: Iterable[Record]) -> dict[str, list[float]]:
    """Each steady point's per-trial figure (req/s, or p99 at a fixed rate), by label."""
    out = {}
    for group in groups(records).values():
        if is_experiment(group[0]):
            continue
        fixed_rate = group[0].offered_rps is not None
        out[_label(group[0])] = latency_values(group) if fixed_rate else rps_values(group)
    return out


def summary_lines(records: list[Record]) -> list[str]:
    """Which TRIALS=auto points reached their target (empty when no record was run so).
    Points of a race (two or more configurations: trials_auto.max_looks set) and make tune's
    searches (metadata.tune) are left out: they stop on their comparisons, which the
    summary's "Decided by racing" and "Tuned by make tune" give, not on each point's own
    interval."""
    auto = [
        r
        for r in records
        if r.status == "ok"
        and r.metadata.get("trials_auto")
        and not r.metadata["trials_auto"].get("max_looks")
        and "tune" not in r.metadata
    ]
    if not auto:
        return []
    settings = auto[0].metadata["trials_auto"]
    target = float(settings["target"])
    figures = point_figures(auto)
    if not figures:  # every run a warm-up start or replaced by its repeat: nothing to judge
        return []
    met = sorted(k for k, v in figures.items() if reached(v, target))
    missed = sorted(k for k in figures if k not in met)
    trials = max(len(v) for v in figures.values())
    widths = {k: half_width(v) for k, v in figures.items()}
    missed_text = ", ".join(
        f"{k} (±{w:.1%})" if (w := widths[k]) is not None else f"{k} (no interval)" for k in missed
    )
    return [
        f"**TRIALS=auto** (target: 95 % interval within ±{target:.0%} of req/s, p99 at a fixed "
        f"rate; budget {math.ceil(int(settings['budget_s']) / 60)} min; up to {trials} "
        f"trials): {len(met)} of {len(figures)} points reached the target"
        + (f"; not reached: {missed_text}." if missed else "."),
        "",
    ]
