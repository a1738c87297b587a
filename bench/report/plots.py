"""Plots: per scenario, req/s and p99 latency against concurrency, one line per configuration.

Input: series already aggregated by bench.report.summary (scenario -> line label -> points of
(concurrency, req/s, p99 ms[, req/s interval, p99 interval]): geometric means over trials and
their 95 % intervals, drawn as error bars). Output: RESULTS/plots/<scenario>.png, and the
relative paths for summary.md to link. matplotlib draws off-screen (Agg): no display needed.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

Point = tuple  # (concurrency, req/s, p99 ms[, (low, high) of req/s, (low, high) of p99])


def _errors(center: list, intervals: list) -> list[list[float]] | None:
    """matplotlib's yerr (distances below and above) where every point has an interval."""
    if not intervals or any(i is None or c is None for i, c in zip(intervals, center, strict=True)):
        return None
    return [
        [c - lo for c, (lo, _) in zip(center, intervals, strict=True)],
        [hi - c for c, (_, hi) in zip(center, intervals, strict=True)],
    ]


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9.-]+", "-", name).strip("-") or "x"


def save_figure(fig: object, path: Path) -> None:
    """Write the figure as PNG through a temp file (a reader never sees half a file)."""
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".png")
    os.close(fd)
    try:
        fig.savefig(tmp, dpi=90)  # type: ignore[attr-defined]
        os.chmod(tmp, 0o644)  # mkstemp makes it private; a results file is for reading
        os.replace(tmp, path)
    finally:
        plt.close(fig)  # type: ignore[arg-type]
        if os.path.exists(tmp):
            os.unlink(tmp)


def plot_scenario(scenario: str, lines: dict[str, list[Point]], path: Path) -> None:
    """Two panels side by side (req/s, p99 ms) against concurrency, written to path as PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (rps_ax, p99_ax) = plt.subplots(1, 2, figsize=(13, 5.5))
    for label, points in sorted(lines.items()):
        points = sorted(points, key=lambda point: point[0])
        conc = [point[0] for point in points]
        rps, p99 = [point[1] for point in points], [point[2] for point in points]
        rps_err = _errors(rps, [point[3] if len(point) > 3 else None for point in points])
        p99_err = _errors(p99, [point[4] if len(point) > 4 else None for point in points])
        line = rps_ax.errorbar(conc, rps, yerr=rps_err, marker="o", capsize=3, label=label)
        p99_ax.errorbar(conc, p99, yerr=p99_err, marker="o", capsize=3, color=line[0].get_color())
    rps_ax.set(title=f"{scenario}: requests/s (geometric mean, 95 % CI)", xlabel="concurrency")
    p99_ax.set(title=f"{scenario}: p99 latency, ms (geometric mean, 95 % CI)", xlabel="concurrency")
    # Tail latencies span orders of magnitude between servers: a log axis keeps all legible.
    p99_ax.set_yscale("log")
    ticks = sorted({point[0] for points in lines.values() for point in points})
    for ax in (rps_ax, p99_ax):
        ax.grid(True, alpha=0.3)
        if len(ticks) > 1:
            # Concurrency levels grow geometrically (5, 10, 30, 50, 100).
            ax.set_xscale("log")
            ax.set_xticks(ticks, [str(t) for t in ticks])
            ax.minorticks_off()
    handles, labels = rps_ax.get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=3, fontsize="small", frameon=False)
    rows = (len(labels) + 2) // 3
    fig.tight_layout(rect=(0, min(0.45, 0.05 * rows + 0.02), 1, 1))
    save_figure(fig, path)


def write_plots(results_dir: Path, series: dict[str, dict[str, list[Point]]]) -> dict[str, str]:
    """A PNG per scenario that has data; scenario -> path relative to results_dir."""
    written = {}
    for scenario, lines in sorted(series.items()):
        if not any(lines.values()):
            continue
        path = results_dir / "plots" / f"{_safe(scenario)}.png"
        plot_scenario(scenario, lines, path)
        written[scenario] = str(path.relative_to(results_dir))
    return written


def plot_study(title: str, metric: str, series: dict[str, list[tuple]], path: Path) -> None:
    """A study's figure: the metric by concurrency per arm, or one bar per arm when each arm
    ran at a single concurrency."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    single = all(len(points) == 1 for points in series.values())
    # One bar per arm: a quarter inch each keeps 40 labels legible.
    height = max(5.0, 0.25 * len(series) + 1.5) if single else 5.0
    fig, ax = plt.subplots(figsize=(10, height))
    if single:
        labels = sorted(series)
        values = [series[label][0][1] or 0.0 for label in labels]
        ax.barh(labels, values)
        ax.set_xlabel(metric)
        ax.invert_yaxis()
    else:
        for label, points in sorted(series.items()):
            points = sorted(points)
            ax.plot([c for c, _ in points], [v for _, v in points], marker="o", label=label)
        ax.set_xlabel("concurrency")
        ax.set_ylabel(metric)
        ax.legend(fontsize="small")
    ax.set_title(title, fontsize="medium")
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    save_figure(fig, path)


def plot_knee(
    scenario: str,
    p99_ms: float,
    lines: dict[str, list[tuple]],
    path: Path,
    crossings: dict[str, tuple] | None = None,
) -> None:
    """p99 against offered rate per server (every step of its capacity search), with the
    objective as a line, and each server's capacity marked on it: a diamond at the crossing,
    its 95 % interval as a horizontal bar."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    fig, ax = plt.subplots(figsize=(10, 5.5))
    for label, points in sorted(lines.items()):
        points = sorted((rate, p99) for rate, p99 in points if p99 is not None)
        (line,) = ax.plot([r for r, _ in points], [p for _, p in points], marker="o", label=label)
        if crossings and label in crossings:
            center, low, high = crossings[label]
            ax.errorbar(
                [center],
                [p99_ms],
                xerr=[[center - low], [high - center]],
                fmt="D",
                color=line.get_color(),
                markersize=8,
                capsize=4,
                zorder=5,
            )
    ax.axhline(p99_ms, color="red", linestyle="--", linewidth=1, label=f"objective {p99_ms:g} ms")
    ax.set(
        title=f"{scenario}: p99 against offered rate (open loop, oha)",
        xlabel="offered requests/s",
        ylabel="p99 latency, ms (from intended send time)",
    )
    ax.set_xscale("log")
    ax.set_yscale("log")
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.grid(True, alpha=0.3, which="both")
    ax.legend(fontsize="small")
    fig.tight_layout()
    save_figure(fig, path)
