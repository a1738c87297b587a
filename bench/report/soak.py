"""The summary's soak section: memory over a long fixed-rate run, per server, beside source
002's 10-minute figures.

Input: records with a `series` (make soak). Output: markdown lines (a table: rate, duration,
achieved req/s, failed %, RSS at the first and last sample, the slope in MB/hour with its 95 %
interval, the lowest and highest minute) and RESULTS/plots/soak-rss.png (RSS of the whole
server, all its processes, over time; one line per server's latest soak).
"""

from __future__ import annotations

from pathlib import Path

from bench.core.outcome import Outcome
from bench.core.record import Record
from bench.observe.soak import slope_mb_per_h
from bench.report.table import markdown_table

# Source 002 (seeds README): 10-minute runs at 100 users on AWS Fargate.
PUBLISHED = {
    "gunicorn-gthread": "69.1 req/s, 0.67 % errors (Gunicorn, 10 min)",
    "granian": "66.2 req/s, 0.00 % errors (Granian, 10 min)",
}


def soak_records(records: list[Record]) -> dict[str, Record]:
    """The latest soak record per server."""
    latest: dict[str, Record] = {}
    for rec in records:
        if rec.series is None or rec.status != "ok":
            continue
        known = latest.get(rec.server)
        if known is None or str(rec.metadata.get("started_at")) > str(
            known.metadata.get("started_at")
        ):
            latest[rec.server] = rec
    return latest


def slope_text(rec: Record) -> str:
    """ "+1.2 MB/h [−0.3, +2.7]" (95 % interval), or why there is none."""
    slope = (rec.series or {}).get("rss_slope_mb_per_h")
    if not slope:
        return "fewer than 3 samples"
    return f"{slope['slope']:+.1f} MB/h [{slope['ci_low']:+.1f}, {slope['ci_high']:+.1f}]"


def later_slope_text(rec: Record) -> str:
    """The slope over the run's second half, "; second half +0.3 MB/h [−1.0, +1.6]": a
    warm-up step (pools, caches filled in the first minutes) lifts the whole run's slope, a
    leak shows in both ("" with fewer than 3 samples there)."""
    series = rec.series or {}
    times, totals = series.get("t_s") or [], series.get("rss_total_mb") or []
    if not times:
        return ""
    middle = (times[0] + times[-1]) / 2
    later = [(t, v) for t, v in zip(times, totals, strict=False) if t >= middle]
    slope = slope_mb_per_h([t for t, _ in later], [v for _, v in later])
    if not slope:
        return ""
    return (
        f"; second half {slope['slope']:+.1f} MB/h "
        f"[{slope['ci_low']:+.1f}, {slope['ci_high']:+.1f}]"
    )


def _failed_pct(rec: Record) -> str:
    pct = Outcome.of_record(rec).unserved_pct
    return "–" if pct is None else f"{pct:.2f}"


def _row(rec: Record) -> list[str]:
    series = rec.series or {}
    totals = series.get("rss_total_mb") or []
    minutes = [m["responses_per_s"] for m in series.get("minutes") or []]
    workers = len(series.get("rss_mb") or {})
    return [
        rec.server,
        f"{rec.offered_rps:g}" if rec.offered_rps else "–",
        f"{rec.duration_s:g}",
        f"{rec.achieved_rps:.1f}" if rec.achieved_rps is not None else "–",
        _failed_pct(rec),
        f"{workers} ({len(totals)} samples each, every {series.get('interval_s')} s)",
        f"{totals[0]:.1f} → {totals[-1]:.1f}" if totals else "–",
        slope_text(rec) + later_slope_text(rec),
        f"{min(minutes):.1f}–{max(minutes):.1f}" if minutes else "–",
        PUBLISHED.get(rec.server, ""),
    ]


def plot_rss(latest: dict[str, Record], path: Path) -> None:
    """RSS of each server's whole tree over its soak, one line per server."""
    from bench.report.plots import plot_lines

    series = {
        server: ((rec.series or {}).get("t_s", []), (rec.series or {}).get("rss_total_mb", []))
        for server, rec in latest.items()
    }
    title = "RSS of the server (all its processes) during the soak"
    plot_lines(title, "s from the start of the run", "RSS MB", series, path)


def soak_sections(records: list[Record], results_dir: Path | None) -> list[str]:
    """The soak section, when any soak record exists."""
    latest = soak_records(records)
    if not latest:
        return []
    lines = ["## Soak: memory over time (make soak)", ""]
    if results_dir is not None:
        plot_rss(latest, results_dir / "plots" / "soak-rss.png")
        lines += ["![RSS over time](plots/soak-rss.png)", ""]
    header = [
        "server",
        "offered req/s",
        "s",
        "achieved req/s",
        "failed %",
        "processes",
        "RSS MB first → last",
        "RSS slope (95 % CI)",
        "req/s per minute, min–max",
        "source 002, 10 min on Fargate",
    ]
    rows = [_row(rec) for _, rec in sorted(latest.items())]
    lines += markdown_table(header, rows, "lrrrrlllll")
    lines += [
        "",
        "Slope: least squares of the whole server's RSS (every process) over time "
        "(scipy.stats.linregress), 95 % interval from its standard error; second half: the "
        "same fit over the run's second half. A run of minutes shows start-up growth (pools, "
        "caches) as much as a leak: a warm-up step lifts the whole run's slope only, a leak "
        "both; compare slopes of equal runs.",
        "",
    ]
    return lines
