"""Figures of the production behaviours: the keep-alive race behind the balancer, the reload,
worker recycling.

Input: every record (those of the lb-keepalive-race study, of LIFECYCLE=reload runs with
their per-request files beside them, and of the recycle study) and the results directory.
Output: RESULTS/plots/race-502-by-gap.png and reload-timeline.png (each only when its records
exist) and the markdown lines that link them with a sentence on what each shows; recycling's
figure is the recycle study's own (bench.studies.sections), linked from here.
"""

from __future__ import annotations

from pathlib import Path

from bench.core.record import Record, latest_per_arm
from bench.load import per_request_files
from bench.observe.lifecycle import BIN_S, TAIL_S, due, parse_requests
from bench.report.plots import plot_race, plot_timelines

RACE_STUDY = "lb-keepalive-race"
RECYCLE_STUDY = "recycle"


def _latest_run(records: list[Record], study: str) -> list[Record]:
    """The ok records of a study, per arm those of its latest run (ARMS= adds to a run)."""
    return [r for r in latest_per_arm(records, study) if r.status == "ok"]


def race_data(records: list[Record]) -> dict[str, list[tuple]]:
    """Per race arm with gaps: (gap ms, sent, 502s) per idle gap of the latest run."""
    arms: dict[str, list[tuple]] = {}
    for rec in _latest_run(records, RACE_STUDY):
        race = (rec.network or {}).get("race") or {}
        by_gap = race.get("by_gap") or {}
        if not by_gap:
            continue
        close = race.get("idle_close_s")
        label = str(rec.metadata.get("study_arm") or rec.server)
        label += f" (closes idle after {close:g} s)" if close else " (no idle close seen)"
        arms[label] = [
            (int(gap), sum(int(n) for n in counts.values()), int(counts.get("502", 0)))
            for gap, counts in by_gap.items()
        ]
    return arms


def reload_timeline(rec: Record, results: Path) -> tuple[list[float], list[int]] | None:
    """Seconds from the reload signal per BIN_S bin, and the arrivals of that bin not
    answered 2xx within the run's latency limit (bench.observe.lifecycle's definition)."""
    life = rec.lifecycle or {}
    files = [results / n for n in per_request_files(rec.load_tool, rec.raw_files)]
    if "at_s" not in life or not rec.offered_rps or not files or not files[0].exists():
        return None
    rows = parse_requests(files[0].read_bytes())
    limit = float(life.get("latency_limit_ms") or 0) or float("inf")
    bins = max(0, int((rec.duration_s - TAIL_S) / BIN_S))
    good = [0] * bins
    for intended, latency, status in rows:
        index = int(intended / BIN_S)
        if 0 <= index < bins and 200 <= status < 300 and latency <= limit:
            good[index] += 1
    late = [max(0, due(rec.offered_rps, b * BIN_S, (b + 1) * BIN_S) - good[b]) for b in range(bins)]
    return [round(b * BIN_S - float(life["at_s"]), 3) for b in range(bins)], late


def reload_data(records: list[Record], results: Path) -> dict[str, tuple[list, list]]:
    """The latest reload run per server (as the production table), its timeline."""
    latest: dict[str, Record] = {}
    for rec in records:
        if rec.lifecycle is None or rec.status != "ok":
            continue
        known = latest.get(rec.server)
        started = str(rec.metadata.get("started_at", ""))
        if known is None or started > str(known.metadata.get("started_at", "")):
            latest[rec.server] = rec
    out = {}
    for server, rec in latest.items():
        timeline = reload_timeline(rec, results)
        if timeline is not None:
            out[server] = timeline
    return out


def figure_sections(records: list[Record], results: Path) -> list[str]:
    """Write the figures whose records exist; the markdown that links them."""
    lines: list[str] = []
    race = race_data(records)
    if race:
        plot_race(race, results / "plots" / "race-502-by-gap.png")
        lines += [
            "![502s by idle gap](plots/race-502-by-gap.png)",
            "",
            "The keep-alive race: per arm of lb-keepalive-race (its latest run), the 502s nginx "
            "(as an ALB, 60 s idle timeout) returned for bursts sent after each idle gap; the "
            "gaps sit around the server's measured idle close.",
            "",
        ]
    reload = reload_data(records, results)
    if reload:
        plot_timelines(
            "Graceful reload under load: arrivals not answered 2xx in time, per "
            f"{BIN_S:g} s (total in each title)",
            "arrivals late or failed per bin",
            reload,
            results / "plots" / "reload-timeline.png",
            marker_x=0.0,
        )
        lines += [
            "![reload timeline](plots/reload-timeline.png)",
            "",
            "Reload: per server's latest LIFECYCLE=reload run, the arrivals of each "
            f"{BIN_S:g} s bin that got no 2xx answer within the run's latency limit (its "
            "lifecycle.latency_limit_ms: LATE_LIMIT_MS for every server from record format 16, "
            "before it 3 × the server's own p99 before the signal, at least +100 ms), from "
            "oha's per-request file.",
            "",
        ]
    if _latest_run(records, RECYCLE_STUDY):
        # One figure per question (issue 32): the recycle study's own, drawn from each arm's
        # geometric mean over its rounds as its table and verdict are. A second figure here
        # of the latest round alone gave other figures for the same arms (gunicorn-sync's
        # p99 recycling 52.1 ms here, 9.66 ms there).
        lines += [
            "Recycling: the recycle study's figure ([plots/study-recycle.png]"
            "(plots/study-recycle.png)) and table, in the studies' section: each arm with and "
            "without the server's own max-requests recycling, over the study's rounds.",
            "",
        ]
    return ["## Figures: production behaviours", "", *lines] if lines else []
