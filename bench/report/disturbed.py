"""Runs measured under foreign load: named in the summary; a repeated one never analysed.

Input: records (foreign_load, foreign_cpu_percent and foreign_top: record format 10). Output:
the summary's "Foreign load" lines: how many runs, which (server, scenario, load, trial, when),
how much CPU others used and the busiest processes by name, and whether each was repeated.
"""

from __future__ import annotations

from collections import Counter

from bench.core.record import Record
from bench.observe.foreign import THRESHOLD_PERCENT
from bench.report.cells import host_of

SHOWN = 6  # runs listed by name; the rest counted


def _run(rec: Record, repeated: set[str]) -> str:
    names = ", ".join(f"{name} {pct:.0f} %" for name, pct in rec.foreign_top or [])
    trial = "warm-up start" if rec.trial == 0 else f"trial {rec.trial}"
    if rec.run_id in repeated:
        again = "repeated"
    elif rec.metadata.get("repeat_of"):
        again = "a repeat, analysed in its run's place"
    else:
        again = "not repeated"
    return (
        f"{rec.server} {rec.scenario} c{rec.concurrency} {trial} at "
        f"{rec.metadata.get('started_at', '?')} on {host_of(rec)}: "
        f"{rec.foreign_cpu_percent or 0:.0f} % of a CPU"
        + (f" ({names})" if names else "")
        + f", {again}"
    )


def summary_lines(records: list[Record]) -> list[str]:
    """The summary's "Foreign load" paragraph (empty when no run was under foreign load)."""
    marked = sorted(
        (r for r in records if r.foreign_load is True),
        key=lambda r: str(r.metadata.get("started_at", "")),
    )
    if not marked:
        return []
    repeated = {str(r.metadata.get("repeat_of")) for r in records if r.metadata.get("repeat_of")}
    busiest: Counter[str] = Counter()
    for rec in marked:
        for name, pct in rec.foreign_top or []:
            busiest[name] += pct
    listed = "; ".join(_run(r, repeated) for r in marked[:SHOWN])
    more = f"; and {len(marked) - SHOWN} more" if len(marked) > SHOWN else ""
    top = ", ".join(name for name, _ in busiest.most_common(3))
    return [
        f"**Foreign load** ({len(marked)} run(s)): {listed}{more}. Processes outside the "
        f"harness's own trees used more than {THRESHOLD_PERCENT:g} % of a CPU on average "
        "through these runs"
        + (f" (mostly {top})" if top else "")
        + ": each is kept in the records, left out of every figure and measured once more; "
        "a repeat under foreign load too stands in its run's place (its figures are "
        "suspect). Measure on a machine nothing else uses.",
        "",
    ]
