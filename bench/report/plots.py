"""Plots: one figure per question, drawn from plain data (no records in here).

Input: series already aggregated by the report's modules (bench.report.summary for the
scenarios, bench.report.openloop for the knees, bench.report.figures for the race, reload,
recycling and soak, the study engine for its verdicts' metrics): labels, numbers and 95 %
intervals. Output: PNG files (matplotlib off-screen, Agg: no display needed) and, for the
scenarios, the relative paths for summary.md to link. Each `plot_x` saves what `x_figure`
draws, so a test reads the series back from the Figure object.

Every figure keeps to one palette (Okabe–Ito: told apart with the common colour-vision
deficiencies, with a marker per series as a second cue) and at most MAX_SERIES series per
axes: the leading configurations are drawn, the rest are left to the tables (the title says
how many), baselines (nginx-static, flask-dev) are grey reference lines, not series.
A configuration that left connections unserved (bench.report.groups.starved: its p99 times
only the requests it accepted) is never drawn as a contender: grey, dashed or hatched, with
STARVED in its label, in every figure it appears in. Labels longer than WRAP_CHARS wrap, and
every bar axis leaves room for its values' labels, so all text stays inside the canvas.
"""

from __future__ import annotations

import math
import os
import tempfile
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.core.record import safe_name
from bench.report.cells import figure

# (concurrency, req/s, p99 ms[, (low, high) of req/s, (low, high) of p99[, starved]])
Point = tuple
STARVED_AT = 5  # a Point's flag: the configuration left connections unserved there
STARVED = "starved: left connections unserved"
STARVED_STYLE = {"color": "#999999", "linestyle": "--", "markerfacecolor": "white"}
STARVED_BAR = {"color": "#DDDDDD", "edgecolor": "#777777", "hatch": "//"}
WRAP_CHARS = 40  # a tick or legend label wraps past this many characters

# Okabe & Ito (2008), "Color Universal Design": distinguishable with protanopia,
# deuteranopia and tritanopia. Yellow last: faint on white, used only by an eighth series.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#000000", "#F0E442")
MARKERS = ("o", "s", "D", "^", "v", "P", "X", "*")
MAX_SERIES = 8
# Reference points, not contenders: the ceiling (nginx answering by itself) and the Flask
# development server (the floor nobody should deploy).
BASELINES = ("nginx-static", "flask-dev")
BASELINE_STYLE = {"color": "#777777", "linestyle": "--", "linewidth": 1.2}


def _pyplot() -> Any:
    """matplotlib's pyplot on the off-screen backend (imported late: the CLI starts fast)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def style(index: int) -> dict[str, object]:
    """Colour and marker of the index-th series of an axes."""
    return {"color": PALETTE[index % len(PALETTE)], "marker": MARKERS[index % len(MARKERS)]}


def wrap(label: str) -> str:
    """A long label on lines of at most WRAP_CHARS characters (it stays inside the canvas)."""
    return textwrap.fill(label, WRAP_CHARS, break_long_words=False, break_on_hyphens=False)


def is_starved(points: Sequence[Point]) -> bool:
    """Whether a configuration's series holds a point where it left connections unserved."""
    return any(len(p) > STARVED_AT and p[STARVED_AT] for p in points)


def starved_label(label: str) -> str:
    """A starved configuration's label: its name and STARVED."""
    return f"{label} ({STARVED})"


def is_baseline(label: str) -> bool:
    """Whether a series label names a baseline server (its first word)."""
    return label.split(" ", 1)[0] in BASELINES


def _errors(center: list, intervals: list) -> list[list[float]] | None:
    """matplotlib's yerr (distances below and above) where every point has an interval."""
    if not intervals or any(i is None or c is None for i, c in zip(intervals, center, strict=True)):
        return None
    return [
        [c - lo for c, (lo, _) in zip(center, intervals, strict=True)],
        [hi - c for c, (_, hi) in zip(center, intervals, strict=True)],
    ]


def save_figure(fig: Any, path: Path) -> None:
    """Write the figure as PNG through a temp file (a reader never sees half a file)."""
    plt = _pyplot()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".png")
    os.close(fd)
    try:
        fig.savefig(tmp, dpi=90)
        os.chmod(tmp, 0o644)  # mkstemp makes it private; a results file is for reading
        os.replace(tmp, path)
    finally:
        plt.close(fig)
        if os.path.exists(tmp):
            os.unlink(tmp)


def leading(lines: dict[str, list[Point]], limit: int = MAX_SERIES) -> list[str]:
    """The non-baseline labels with the highest best req/s, at most `limit`, best first."""
    contenders = [label for label in lines if not is_baseline(label)]
    best = {label: max((p[1] or 0.0 for p in lines[label]), default=0.0) for label in contenders}
    return sorted(contenders, key=lambda label: (-best[label], label))[:limit]


def _concurrency_axis(ax: Any, ticks: list[int]) -> None:
    """Concurrency levels grow geometrically (5, 10, 30, 50, 100): a log axis, ticks as given."""
    ax.grid(True, alpha=0.3)
    if len(ticks) > 1:
        ax.set_xscale("log")
        ax.set_xticks(ticks, [str(t) for t in ticks])
        ax.minorticks_off()


def _reference(ax: Any, label: str, points: list[Point], column: int, top: float) -> None:
    """A baseline as a grey dashed line, named at its right end; above the axes' range it is
    named at the top edge instead (nginx-static would flatten every server into the bottom)."""
    points = sorted((p for p in points if p[column] is not None), key=lambda p: p[0])
    if not points:
        return
    xs, ys = [p[0] for p in points], [p[column] for p in points]
    ax.plot(xs, ys, **BASELINE_STYLE)
    name = label.split(" ", 1)[0]
    if max(ys) > top:
        text = f"{name}: {max(ys):,.0f} (above the axis)"
        ax.annotate(
            text,
            (xs[-1], top),
            xytext=(0, -12),
            textcoords="offset points",
            ha="right",
            fontsize="small",
            color="#555555",
        )
    else:
        ax.annotate(
            name,
            (xs[-1], ys[-1]),
            xytext=(3, 3),
            textcoords="offset points",
            fontsize="small",
            color="#555555",
        )


def _dodge(xs: list, index: int, count: int) -> list[float]:
    """Spread series apart along a log x axis by a few per cent, so that error bars of
    configurations measured at the same concurrency do not hide each other."""
    return [x * (1 + 0.02 * (index - (count - 1) / 2)) for x in xs]


def _scenario_lines(
    ax_rps: Any, ax_p99: Any, lines: dict[str, list[Point]], shown: list[str]
) -> None:
    """The leading configurations with their intervals, then the baselines for reference."""
    # Tail latencies span orders of magnitude between servers: a log axis keeps all legible.
    ax_p99.set_yscale("log")
    for index, label in enumerate(shown):
        points = sorted(lines[label], key=lambda point: point[0])
        conc = _dodge([p[0] for p in points], index, len(shown))
        rps, p99 = [p[1] for p in points], [p[2] for p in points]
        rps_err = _errors(rps, [p[3] if len(p) > 3 else None for p in points])
        p99_err = _errors(p99, [p[4] if len(p) > 4 else None for p in points])
        look = style(index)
        name = label
        if is_starved(points):  # grey and dashed, hollow markers: not a contender
            look, name = look | STARVED_STYLE, starved_label(label)
        ax_rps.errorbar(conc, rps, yerr=rps_err, capsize=3, label=wrap(name), **look)
        ax_p99.errorbar(conc, p99, yerr=p99_err, capsize=3, **look)
    top = 1.15 * max(_high(p, 1, 3) for s in shown for p in lines[s])
    ax_rps.set_ylim(0, top)
    p99_values = [p[2] for s in shown for p in lines[s] if p[2]]
    p99_top = 2 * max(_high(p, 2, 4) for s in shown for p in lines[s])
    ax_p99.set_ylim(0.5 * min(p99_values, default=1.0), p99_top)
    for label in sorted(label for label in lines if is_baseline(label)):
        _reference(ax_rps, label, lines[label], 1, top)
        _reference(ax_p99, label, lines[label], 2, p99_top)


def _spread(lines: dict[str, list[Point]], shown: list[str], interval: int) -> str:
    """What the error bars are, as a title says it: "95 % CI" where some point has an
    interval, else that none has (one trial each: no interval is claimed)."""
    drawn = any(len(p) > interval and p[interval] for s in shown for p in lines[s])
    return "95 % CI" if drawn else "one trial: no interval"


def _high(point: Point, column: int, interval: int) -> float:
    """A point's upper interval end where it has one, else its value (0 when missing)."""
    if len(point) > interval and point[interval]:
        return float(point[interval][1])
    return float(point[column] or 0.0)


def _legend_below(fig: Any, ax: Any, ncol: int = 2) -> None:
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=ncol, fontsize="small", frameon=False)
    rows = (len(labels) + ncol - 1) // ncol
    fig.tight_layout(rect=(0, min(0.4, 0.055 * rows + 0.03), 1, 1))


def scenario_figure(scenario: str, lines: dict[str, list[Point]]) -> Any:
    """req/s and p99 (ms) against concurrency, the leading configurations as series; a
    scenario measured at one concurrency gets bars instead."""
    plt = _pyplot()
    shown = leading(lines)
    ticks = sorted({p[0] for points in lines.values() for p in points})
    if len(ticks) == 1:
        return bars_figure(f"{scenario} at concurrency {ticks[0]}", _bar_panels(lines))
    fig, (ax_rps, ax_p99) = plt.subplots(1, 2, figsize=(13, 5.5))
    _scenario_lines(ax_rps, ax_p99, lines, shown)
    rest = len([label for label in lines if not is_baseline(label)]) - len(shown)
    more = f"; {rest} more in the table" if rest > 0 else ""
    ax_rps.set(
        title=f"{scenario}: req/s (geometric mean, {_spread(lines, shown, 3)}){more}",
        xlabel="concurrency (connections)",
        ylabel="requests/s",
    )
    ax_p99.set(
        title=f"{scenario}: p99 latency (geometric mean, {_spread(lines, shown, 4)})",
        xlabel="concurrency (connections)",
        ylabel="p99 ms (log scale)",
    )
    for ax in (ax_rps, ax_p99):
        _concurrency_axis(ax, ticks)
    _legend_below(fig, ax_rps)
    return fig


def plot_scenario(scenario: str, lines: dict[str, list[Point]], path: Path) -> None:
    """The scenario's figure (scenario_figure) written to path as PNG."""
    save_figure(scenario_figure(scenario, lines), path)


def _bar_panels(lines: dict[str, list[Point]]) -> list[tuple[str, dict[str, tuple]]]:
    """One point per configuration -> (req/s, p99) bar panels: value and interval per label
    (a starved configuration's label says so: bars_figure hatches it)."""
    shown = leading(lines) + sorted(label for label in lines if is_baseline(label))
    names = {label: starved_label(label) if is_starved(lines[label]) else label for label in shown}
    rps = {
        names[label]: (
            lines[label][0][1],
            lines[label][0][3] if len(lines[label][0]) > 3 else None,
        )
        for label in shown
    }
    p99 = {
        names[label]: (
            lines[label][0][2],
            lines[label][0][4] if len(lines[label][0]) > 4 else None,
        )
        for label in shown
    }
    return [
        (f"requests/s (geometric mean, {_spread(lines, shown, 3)})", rps),
        (f"p99 ms (geometric mean, {_spread(lines, shown, 4)})", p99),
    ]


def _bar_colour(label: str) -> str:
    return "#AAAAAA" if is_baseline(label) else PALETTE[0]


def _value_room(ax: Any, highs: list[float], log: bool) -> None:
    """The bar axis ends past its longest bar (or interval): room for the value's label."""
    top = max(highs, default=0.0)
    if top <= 0:
        return
    if log:
        ax.set_xlim(right=top * VALUE_ROOM**4)
    else:
        ax.set_xlim(0, top * VALUE_ROOM)


def bars_figure(title: str, panels: Sequence[tuple[str, dict[str, tuple]]]) -> Any:
    """Side-by-side horizontal bar panels sharing their labels (named once, on the left,
    wrapped); each maps a label to (value, (low, high) or None). Baselines are grey, a
    starved configuration (STARVED in its label) hatched grey, the others one colour; a metric
    named "... log scale" gets a log axis."""
    plt = _pyplot()
    labels = list(dict.fromkeys(label for _, values in panels for label in values))
    wrapped = [wrap(label) for label in labels]
    lines = sum(w.count("\n") + 1 for w in wrapped)
    widest = max((len(line) for w in wrapped for line in w.split("\n")), default=0)
    height = max(3.5, 0.3 * lines + 0.25 * len(labels) + 1.8)
    width = INCH_PER_CHAR * widest + 5.0 * len(panels) + 0.5
    fig, axes = plt.subplots(
        1,
        len(panels),
        figsize=(width, height),
        squeeze=False,
        sharey=True,
        layout="constrained",
    )
    for ax, (metric, values) in zip(axes[0], panels, strict=True):
        shown = [i for i, label in enumerate(labels) if values.get(label, (None,))[0] is not None]
        centers = [float(values[labels[i]][0]) for i in shown]
        err = _errors(centers, [values[labels[i]][1] for i in shown])
        for y, value, label in zip(shown, centers, [labels[i] for i in shown], strict=True):
            look = STARVED_BAR if STARVED in label else {"color": _bar_colour(label)}
            ax.barh([y], [value], **look)
        if err is not None:
            ax.errorbar(centers, shown, xerr=err, fmt="none", ecolor="black", capsize=3)
        ax.set_xlabel(wrap(metric))
        log = "log scale" in metric
        if log:
            ax.set_xscale("log")
        highs = [
            float(values[labels[i]][1][1]) if values[labels[i]][1] else c
            for i, c in zip(shown, centers, strict=True)
        ]
        _value_room(ax, highs, log)
        ax.grid(True, axis="x", alpha=0.3)
        for y, value in zip(shown, centers, strict=True):
            ax.annotate(f" {figure(value)}", (value, y), va="center", fontsize="small")
    axes[0][0].set_yticks(range(len(labels)), wrapped)
    axes[0][0].invert_yaxis()
    fig.suptitle(title, fontsize="medium")
    return fig


def answer_figure(panels: Sequence[tuple[str, dict[str, tuple]]]) -> Any:
    """The first screen's chart: one panel per workload, stacked, each with its own
    configurations best first (value and (low, high) or None per label), req/s bars with
    their 95 % intervals; at most MAX_SERIES bars a panel."""
    plt = _pyplot()
    rows = [len(values) for _, values in panels]
    fig, axes = plt.subplots(
        len(panels),
        1,
        figsize=(9.0, 0.5 * sum(rows) + 1.0 * len(panels) + 0.5),
        squeeze=False,
        layout="constrained",
        height_ratios=[max(1, n) for n in rows],
    )
    for ax, (title, values) in zip(axes[:, 0], panels, strict=True):
        labels = list(values)
        centers = [float(values[label][0]) for label in labels]
        ys = list(range(len(labels)))
        colours = [_bar_colour(label) for label in labels]
        ax.barh(ys, centers, color=colours)
        err = _errors(centers, [values[label][1] for label in labels])
        if err is not None:
            ax.errorbar(centers, ys, xerr=err, fmt="none", ecolor="black", capsize=3)
        highs = [
            float(values[x][1][1]) if values[x][1] else c
            for x, c in zip(labels, centers, strict=True)
        ]
        _value_room(ax, highs, False)
        # the value past its interval's end: never on the error bar's cap
        for y, value, high in zip(ys, centers, highs, strict=True):
            ax.annotate(f"  {figure(value)}", (max(value, high), y), va="center", fontsize="small")
        ax.set_yticks(ys, [wrap(label) for label in labels])
        ax.invert_yaxis()
        ax.set_title(title, fontsize="medium", loc="left")
        ax.grid(True, axis="x", alpha=0.3)
    axes[-1][0].set_xlabel("requests/s (geometric mean over trials, 95 % interval)")
    return fig


def write_plots(results_dir: Path, series: dict[str, dict[str, list[Point]]]) -> dict[str, str]:
    """A PNG per scenario that has data; scenario -> path relative to results_dir."""
    written = {}
    for scenario, lines in sorted(series.items()):
        if not any(lines.values()):
            continue
        path = results_dir / "plots" / f"{safe_name(scenario)}.png"
        plot_scenario(scenario, lines, path)
        written[scenario] = str(path.relative_to(results_dir))
    return written


# -- studies ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Panel:
    """One metric of a study: per series (arm), its (x, value) points; x is the concurrency
    (closed loop) or the offered rate (open loop), named by x_label."""

    metric: str
    x_label: str
    series: dict[str, list[tuple]]
    # the series (labels) of configurations that left connections unserved: drawn grey
    starved: frozenset[str] = frozenset()


def _grid(count: int, columns: int) -> tuple[int, int]:
    return max(1, math.ceil(count / columns)), min(columns, max(1, count))


NO_VALUE = "no value (see the table)"  # an arm without the metric: no bar, never a 0 bar


def _panel_bars(ax: Any, panel: Panel) -> None:
    """One bar per arm; an arm without a value (a server that cannot reload, say) gets no
    bar and says so, so that it is not read as a 0."""
    labels = sorted(panel.series)
    values = [panel.series[label][0][1] for label in labels]
    for y, (label, value) in enumerate(zip(labels, values, strict=True)):
        if value is not None:
            look = STARVED_BAR if label in panel.starved else {"color": PALETTE[0]}
            ax.barh([y], [float(value)], **look)
    names = [starved_label(label) if label in panel.starved else label for label in labels]
    ax.set_yticks(range(len(labels)), names)
    # every row inside the axes, the first at the top: a row without a bar at either end
    # would otherwise sit on the axes' edge (autoscale sees only the bars)
    ax.set_ylim(len(labels) - 0.5, -0.5)
    ax.grid(True, axis="x", alpha=0.3)
    # room right of the longest bar for its value, so every label stays inside the axes
    known = [float(v) for v in values if v is not None]
    left = 0.0
    if wide_range(known):
        # 2 ms beside 3,640 ms: on a linear axis every short bar is a hairline
        left = min(known) / VALUE_ROOM**2
        ax.set_xscale("log")
        ax.set_xlim(left, max(known) * VALUE_ROOM**4)
        ax.set_xlabel(f"{panel.metric} (log scale)")
    else:
        ax.set_xlim(0, VALUE_ROOM * max(known, default=0.0) or 1.0)
        ax.set_xlabel(panel.metric)
    for y, value in enumerate(values):
        text = f" {figure(value)}" if value is not None else f" {NO_VALUE}"
        style = {} if value is not None else {"color": "grey", "style": "italic"}
        ax.annotate(text, (value or left, y), va="center", fontsize="small", **style)


WIDE = 100.0  # a bar panel whose values span this factor or more is drawn on a log axis


def wide_range(values: Sequence[float]) -> bool:
    """Whether bars of these values need a log axis: two or more, all above 0 (a 0 has no
    place on it), the largest at least WIDE times the smallest."""
    return len(values) > 1 and min(values) > 0 and max(values) >= WIDE * min(values)


def _panel_lines(ax: Any, panel: Panel, labels: list[str]) -> None:
    for index, label in enumerate(labels):
        points = sorted(p for p in panel.series[label] if p[1] is not None)
        look, name = style(index), label
        if label in panel.starved:
            look, name = look | STARVED_STYLE, starved_label(label)
        ax.plot([p[0] for p in points], [p[1] for p in points], label=wrap(name), **look)
    ax.set(xlabel=panel.x_label, ylabel=panel.metric)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="x-small")


def _panel_axes(panels: Sequence[Panel]) -> list[tuple[Panel, list[str] | None]]:
    """Axes to draw: a bar panel per metric whose series have one point each, else line
    panels of at most MAX_SERIES series each (small multiples)."""
    out: list[tuple[Panel, list[str] | None]] = []
    for panel in panels:
        if all(len(points) == 1 for points in panel.series.values()):
            out.append((panel, None))
            continue
        labels = sorted(panel.series)
        for start in range(0, len(labels), MAX_SERIES):
            out.append((panel, labels[start : start + MAX_SERIES]))
    return out


def _all_zero(panel: Panel) -> bool:
    """A panel whose every value is 0 (or missing): an empty chart, said in the title instead."""
    return not any(value for points in panel.series.values() for _, value in points)


VALUE_ROOM = 1.2  # a bar axis ends a fifth past its longest bar: room for the value's label
LONG_LABEL = 28  # characters: bar labels longer than this get panels one above the other
INCH_PER_CHAR = 0.075  # a tick label's width per character at the default font, in inches


def _panel_height(panel: Panel, labels: list[str] | None) -> float:
    """Inches a panel needs: a bar panel (labels None) about 0.28 per bar, a line panel 4.5."""
    return max(3.0, 0.28 * len(panel.series) + 1.5) if labels is None else 4.5


def study_figure(title: str, panels: Sequence[Panel]) -> Any:
    """A study's figure: one panel per metric its verdict judges (bars when each arm has one
    point, lines against concurrency or offered rate otherwise); a metric that is 0 in every
    arm is named in the title, not drawn."""
    plt = _pyplot()
    zero = [p.metric for p in panels if p.series and _all_zero(p)]
    axes_data = _panel_axes([p for p in panels if p.series and not _all_zero(p)])
    # long bar labels (an arm's label and its limits) beside a second column's labels overlap
    # it: such panels go one above the other, the figure as wide as the labels need
    longest = max(
        (
            len(starved_label(s) if s in p.starved else s)
            for p, lab in axes_data
            if lab is None
            for s in p.series
        ),
        default=0,
    )
    rows, cols = _grid(len(axes_data), 1 if longest > LONG_LABEL else 2)
    # each row as tall as its own panels need (7 bars beside a row of 29: not 29 rows tall)
    heights = [
        max(_panel_height(p, labels) for p, labels in axes_data[row * cols : (row + 1) * cols])
        for row in range(rows)
    ]
    width = max(7.5 * cols, INCH_PER_CHAR * longest + 6.0)
    fig, axes = plt.subplots(
        rows,
        cols,
        figsize=(width, sum(heights)),
        squeeze=False,
        layout="constrained",
        gridspec_kw={"height_ratios": heights},
    )
    flat = [ax for row in axes for ax in row]
    for ax, (panel, labels) in zip(flat, axes_data, strict=False):
        if labels is None:
            _panel_bars(ax, panel)
        else:
            _panel_lines(ax, panel, labels)
        ax.set_title(panel.metric, fontsize="small")
    for ax in flat[len(axes_data) :]:
        ax.set_visible(False)
    note = f"\n0 in every arm (in the table, not drawn): {', '.join(zero)}" if zero else ""
    fig.suptitle(title + note, fontsize="medium")
    return fig


def plot_study(title: str, panels: Sequence[Panel], path: Path) -> None:
    """The study's figure (study_figure) written to path as PNG."""
    save_figure(study_figure(title, panels), path)


# -- open loop: the knee ------------------------------------------------------------------


@dataclass(frozen=True)
class Knee:
    """One capacity search: every step as (offered req/s, p99 ms or None, met the objective
    or None), and the capacity found with its interval where the search gives one."""

    label: str
    steps: list[tuple]
    capacity: float | None
    interval: tuple[float, float] | None = None


def _draw_knee(ax: Any, knee: Knee, index: int) -> None:
    """Every step as a marker (hollow: missed the objective), the median p99 per offered rate
    joined in rate order, the capacity as a vertical line (its interval shaded)."""
    look = style(index)
    by_rate: dict[float, list[float]] = {}
    for rate, p99, passed in knee.steps:
        if p99 is None:
            continue
        by_rate.setdefault(float(rate), []).append(float(p99))
        face = look["color"] if passed is not False else "white"
        ax.plot([rate], [p99], linestyle="none", markerfacecolor=face, alpha=0.8, **look)
    rates = sorted(by_rate)
    medians = [sorted(by_rate[r])[len(by_rate[r]) // 2] for r in rates]
    name = knee.label + (f": {knee.capacity:,.0f} req/s" if knee.capacity else ": not confirmed")
    ax.plot(rates, medians, color=look["color"], linewidth=1.2, label=name)
    if knee.capacity:
        ax.axvline(knee.capacity, color=look["color"], linestyle=":", linewidth=1.5)
        if knee.interval:
            ax.axvspan(*knee.interval, color=look["color"], alpha=0.12)


def knee_figure(scenario: str, p99_ms: float, knees: Sequence[Knee]) -> Any:
    """p99 against offered rate per search (ordered by rate, every step shown), the objective
    as a red line and each capacity as a dotted vertical line in its series' colour."""
    plt = _pyplot()
    import matplotlib.ticker

    shown = sorted(knees, key=lambda k: (-(k.capacity or 0.0), k.label))[:MAX_SERIES]
    fig, ax = plt.subplots(figsize=(10, 6))
    for index, knee in enumerate(shown):
        _draw_knee(ax, knee, index)
    ax.axhline(
        p99_ms,
        color="#D55E00",
        linestyle="--",
        linewidth=1.2,
        label=f"objective: p99 ≤ {p99_ms:g} ms",
    )
    more = f" ({len(knees) - len(shown)} more in the table)" if len(knees) > len(shown) else ""
    ax.set(
        title=f"{scenario}: p99 against offered rate (open loop, oha){more}\n"
        "filled: step met the objective, hollow: missed it; dotted: capacity found",
        xlabel="offered requests/s (log scale)",
        ylabel="p99 ms from intended send time (log scale)",
    )
    ax.set_xscale("log")
    ax.set_yscale("log")
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.grid(True, alpha=0.3, which="both")
    ax.legend(fontsize="small")
    fig.tight_layout()
    return fig


def plot_knee(scenario: str, p99_ms: float, knees: Sequence[Knee], path: Path) -> None:
    """The knee figure (knee_figure) written to path as PNG."""
    save_figure(knee_figure(scenario, p99_ms, knees), path)


# -- production behaviours ----------------------------------------------------------------


def race_figure(arms: dict[str, list[tuple]]) -> Any:
    """502s by idle gap behind the balancer: per arm (small multiples), a bar per idle gap;
    each arm maps to (gap ms, sent, 502s) per gap."""
    plt = _pyplot()
    labels = [label for label in arms if arms[label]]
    rows, cols = _grid(len(labels), 3)
    fig, axes = plt.subplots(
        rows,
        cols,
        figsize=(5.2 * cols, 2.6 * rows + 0.8),
        squeeze=False,
        layout="constrained",
        sharey=True,
    )
    flat = [ax for row in axes for ax in row]
    for ax, label in zip(flat, labels, strict=False):
        gaps = sorted(arms[label])
        names = [f"{gap:g}" for gap, _, _ in gaps]
        bad = [n502 for _, _, n502 in gaps]
        ax.bar(names, bad, color=[PALETTE[3] if n else "#BBBBBB" for n in bad])
        sent = sum(s for _, s, _ in gaps)
        ax.set_title(f"{label}\n{sum(bad)} × 502 in {sent:,} sent", fontsize="x-small")
        ax.tick_params(axis="x", labelsize="x-small", rotation=90)
        ax.grid(True, axis="y", alpha=0.3)
    for ax in flat[len(labels) :]:
        ax.set_visible(False)
    fig.suptitle(
        "The keep-alive race behind the ALB-like front: 502s per idle gap "
        "(x: idle gap before the burst, ms; the gaps sit around each server's measured close)",
        fontsize="medium",
    )
    fig.supylabel("502 responses")
    return fig


def plot_race(arms: dict[str, list[tuple]], path: Path) -> None:
    """The race figure (race_figure) written to path as PNG."""
    save_figure(race_figure(arms), path)


def timelines_figure(
    title: str, ylabel: str, series: dict[str, tuple[list, list]], marker_x: float | None = None
) -> Any:
    """Small multiples of one quantity over time, one panel per label (shared axes), with a
    vertical line at marker_x (e.g. the reload signal)."""
    plt = _pyplot()
    labels = sorted(series)
    rows, cols = _grid(len(labels), 4)
    fig, axes = plt.subplots(
        rows,
        cols,
        figsize=(4 * cols, 2.3 * rows + 0.9),
        squeeze=False,
        layout="constrained",
        sharex=True,
        sharey=True,
    )
    flat = [ax for row in axes for ax in row]
    for ax, label in zip(flat, labels, strict=False):
        xs, ys = series[label]
        ax.step(xs, ys, where="post", color=PALETTE[0])
        if marker_x is not None:
            ax.axvline(marker_x, color=PALETTE[3], linestyle="--", linewidth=1)
        ax.set_title(f"{label}: {sum(ys):,.0f}", fontsize="small")
        ax.grid(True, alpha=0.3)
    for ax in flat[len(labels) :]:
        ax.set_visible(False)
    fig.suptitle(title, fontsize="medium")
    fig.supylabel(ylabel, fontsize="small")
    fig.supxlabel(
        "s from the signal (dashed line)" if marker_x is not None else "s", fontsize="small"
    )
    return fig


def plot_timelines(
    title: str,
    ylabel: str,
    series: dict[str, tuple[list, list]],
    path: Path,
    marker_x: float | None = None,
) -> None:
    """The timelines (timelines_figure) written to path as PNG."""
    save_figure(timelines_figure(title, ylabel, series, marker_x), path)


def lines_figure(title: str, xlabel: str, ylabel: str, series: dict[str, tuple[list, list]]) -> Any:
    """One axes of at most MAX_SERIES lines (the first ones by label), e.g. RSS over time."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(10, 5))
    for index, label in enumerate(sorted(series)[:MAX_SERIES]):
        xs, ys = series[label]
        ax.plot(xs, ys, label=label, markevery=max(1, len(xs) // 12), **style(index))
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    return fig


def plot_lines(
    title: str, xlabel: str, ylabel: str, series: dict[str, tuple[list, list]], path: Path
) -> None:
    """The lines (lines_figure) written to path as PNG."""
    save_figure(lines_figure(title, xlabel, ylabel, series), path)
