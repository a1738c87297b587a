"""The study section's lines on its tuned arms: what make tune's search did for each.

Input: a study's records of one run (a tuned arm's carry metadata.study_tuned, written by
bench.studies.tuning). Output: markdown lines: per tuned arm the configuration it ran, why
the search stopped, the best with its figure, the runner-up with its ratio and interval,
those equivalent within ±margin, every configuration tried and why one left; empty when no
arm was tuned.
"""

from __future__ import annotations

from bench.core.record import Record
from bench.report.cells import figure
from bench.report.decision import margin_text
from bench.report.tuned import ratio_text


def _tried(search: dict) -> str:
    """Every configuration tried: its median figure and how it ended."""
    items = []
    for c in search.get("tried") or []:
        shown = figure(c["figure"]) if c.get("figure") is not None else "–"
        why = f": {c['reason']}" if c.get("reason") else ""
        items.append(f"{c['label']} {shown} ({c['state']}{why})")
    return "; ".join(items) or "none"


def arm_lines(arm: str, label: str, search: dict) -> list[str]:
    """One tuned arm's search, as lines of a list item."""
    unit = search.get("unit") or ""
    rec, best = search.get("recommended") or {}, search.get("best") or {}
    margin = margin_text(float(search.get("margin") or 0))
    best_figure = f" ({figure(best['figure'])} {unit})" if best.get("figure") else ""
    same = ", ".join(search.get("equivalent") or []) or "none"
    runner = search.get("runner_up")
    tried = len(search.get("tried") or [])
    return [
        f"- {label} (`{arm}`): ran **{rec.get('label')}**; the search ended "
        f"{search.get('why')} after {search.get('rounds')} round(s), "
        f"{float(search.get('minutes') or 0):.1f} min, {tried} of "
        f"{search.get('space_size')} configuration(s) in the grid tried: {search.get('line')}",
        f"  - best {best.get('label')}{best_figure}"
        + (f"; runner-up {runner['label']}: best/it {ratio_text(runner)}" if runner else "")
        + f"; equivalent within {margin}: {same}",
        f"  - tried: {_tried(search)}",
        f"  - answer: `{search.get('answer')}` (RESULTS/; `make bench` never reads it)",
    ]


def search_lines(labels: dict[str, str], records: list[Record]) -> list[str]:
    """The lines on every tuned arm of a run's records (empty: none was tuned)."""
    seen: dict[str, dict] = {}
    for rec in records:
        arm, search = str(rec.metadata.get("study_arm")), rec.metadata.get("study_tuned")
        if isinstance(search, dict) and arm not in seen:
            seen[arm] = search
    if not seen:
        return []
    objective = next(iter(seen.values())).get("objective")
    lines = [
        f"**Tuned arms** (make tune's search at the arm's point before the first phase, "
        f"objective {objective}; the arm runs the configuration it recommends, the least "
        "memory among the best and those within ±margin of it):",
        "",
    ]
    for arm, search in sorted(seen.items()):
        lines += arm_lines(arm, labels.get(arm, arm), search)
    return [*lines, ""]
