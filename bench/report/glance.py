"""The summary's first section, "At a glance": per scenario and load, the best
configuration(s), the margin to the next with its significance, and the caveats; per capacity
objective the best capacity; one line per study verdict.

Input: records (and the rendered study sections, for their verdict lines). Output: markdown
lines. Everything comes from the records: nothing here is typed in.
"""

from __future__ import annotations

from collections import defaultdict

from bench.core.record import Record
from bench.load import uses_threads
from bench.report.cells import host_of, knobs_label, num, via_label
from bench.report.groups import (
    CEILING,
    SERVED_MIN,
    arena_key,
    groups,
    is_experiment,
    latency_values,
    ranks,
    rps_values,
    served_share,
)
from bench.report.openloop import capacity_found, searches
from bench.report.stats import Ranked, difference, estimate
from bench.report.table import markdown_table

LOAD_SATURATED = 0.9  # the load tool used over 90 % of its threads' CPU
FEW_TRIALS = 3

HEADER = [
    "scenario",
    "load",
    "best by req/s",
    "req/s",
    "margin to next",
    "best by p99",
    "p99 ms",
    "margin to next",
    "caveats",
]


def _label(rec: Record) -> str:
    parts = [rec.server, knobs_label(rec.knobs or {})]
    if via_label(rec) != "direct":
        parts.append(f"({via_label(rec)})")
    return " ".join(p for p in parts if p)


def _load(rec: Record) -> str:
    if rec.offered_rps is not None:
        return f"{rec.load_tool} {num(rec.offered_rps)}/s"
    return f"{rec.load_tool} c{rec.concurrency}"


def _best(
    members: dict[tuple, list[Record]], ranked: dict[tuple, Ranked], values, higher: bool
) -> tuple[list[tuple], tuple | None]:
    """The keys of the rank-1 group and the best configuration outside it."""
    present = [k for k in members if k in ranked]
    if not present:
        return [], None
    top = [k for k in present if ranked[k].rank == 1]
    rest = [k for k in present if ranked[k].rank != 1]

    def center(key: tuple) -> float:
        est = estimate(values(members[key]))
        return est.center if est else 0.0

    top.sort(key=center, reverse=higher)
    if not rest:
        return top, None
    return top, (max(rest, key=center) if higher else min(rest, key=center))


def _names(members: dict[tuple, list[Record]], keys: list[tuple]) -> str:
    names = [_label(members[k][0]) for k in keys]
    if len(names) > 3:
        return " = ".join(names[:3]) + f" = {len(names) - 3} more"
    return " = ".join(names)


def _margin(members: dict[tuple, list[Record]], top: list[tuple], nxt: tuple | None, values) -> str:
    """The leader against the best configuration outside its tie group."""
    if nxt is None:
        return "all tied" if len(top) > 1 else "alone"
    diff = difference(values(members[nxt]), values(members[top[0]]))
    if diff.ratio is None:
        return "–"
    interval = f" [{diff.low:.2f}–{diff.high:.2f}]" if diff.low is not None else ""
    word = "significant" if diff.significant else "not significant"
    return f"{diff.ratio:.2f}×{interval} vs {_label(members[nxt][0])}, {word}"


def _caveats(group_list: list[list[Record]]) -> str:
    notes = []
    records = [r for g in group_list for r in g]
    if min(len(g) for g in group_list) < FEW_TRIALS:
        notes.append(f"{min(len(g) for g in group_list)} trial(s): ties cannot be told apart")
    if any(
        (s := served_share(r)) is not None and s < SERVED_MIN
        for r in records
        if r.offered_rps is None
    ):
        notes.append("† unserved connections: p99 optimistic")
    threads = [
        (r.resources or {}).get("load_cpu_pct", 0) / (100 * (r.load_threads or 1))
        for r in records
        if r.resources and uses_threads(r.load_tool)
    ]
    if threads and max(threads) >= LOAD_SATURATED:
        notes.append(f"load tool near saturation ({max(threads):.0%} of its CPU)")
    return "; ".join(notes) or "–"


def _arena_rows(records: list[Record]) -> list[tuple]:
    candidates = [
        r
        for r in records
        if not r.emulated
        and "study" not in r.metadata
        and "capacity" not in r.metadata
        and not is_experiment(r)
        and r.server != CEILING
    ]
    all_groups = groups(candidates)
    by_rps, by_p99 = ranks(all_groups)
    arenas: dict[tuple, dict[tuple, list[Record]]] = defaultdict(dict)
    for key, group in all_groups.items():
        arenas[arena_key(group[0])][key] = group
    rows = []
    for arena, members in arenas.items():
        first = next(iter(members.values()))[0]
        top_rps, next_rps = _best(members, by_rps, rps_values, higher=True)
        top_p99, next_p99 = _best(members, by_p99, latency_values, higher=False)
        if not top_rps:
            continue
        rps_est = estimate(rps_values(members[top_rps[0]]))
        p99_est = estimate(latency_values(members[top_p99[0]])) if top_p99 else None
        best_groups = [members[k] for k in {*top_rps, *top_p99}]
        row = [
            first.scenario,
            _load(first),
            _names(members, top_rps) + (f" (of {len(members)})" if len(members) > 1 else ""),
            num(rps_est.center if rps_est else None),
            _margin(members, top_rps, next_rps, rps_values),
            _names(members, top_p99) if top_p99 else "–",
            num(p99_est.center if p99_est else None, 2),
            _margin(members, top_p99, next_p99, latency_values) if top_p99 else "–",
            _caveats(best_groups),
        ]
        sort_key = (host_of(first), first.scenario, first.load_tool, first.offered_rps or 0.0)
        rows.append(((*sort_key, first.concurrency, str(arena)), host_of(first), row))
    rows.sort(key=lambda row: row[0])
    return rows


def _capacity_lines(records: list[Record]) -> list[str]:
    lines = []
    for (p99_ms, scenario), by_search in sorted(searches(records).items()):
        found = []
        for steps in by_search.values():
            capacity = capacity_found(steps)
            if capacity is not None and steps[0].server != CEILING:
                found.append((capacity, _label(steps[0]), host_of(steps[0])))
        if not found:
            continue
        found.sort(reverse=True)
        best = found[0]
        text = f"- Capacity at p99 ≤ {p99_ms:g} ms, {scenario}: **{best[1]}** {num(best[0])} req/s"
        if len(found) > 1:
            text += f", {best[0] / found[1][0]:.2f}× {found[1][1]} ({num(found[1][0])} req/s)"
        lines.append(
            text + " — one search per server (no interval: a search's result is a lower "
            "bound within 5 %, confirmed once)."
        )
    return lines


def _verdicts(extra: list[str]) -> list[str]:
    """One line per study, from its rendered section (`## Study: name — title`, then the
    `**Verdict: …**` line; a study without a verdict rule, such as the load-balancer ones,
    gets its first measured line)."""
    lines, title, measured = [], None, False
    for line in extra:
        if line.startswith("## "):
            title = line.removeprefix("## Study: ") if line.startswith("## Study: ") else None
            measured = False
        elif title and line.startswith("**Verdict: "):
            verdict = line.split("**")[1].removeprefix("Verdict: ")
            lines.append(f"- Study {title}: **{verdict}**.")
            title = None
        elif title and line.startswith("Measured (counts from the records)"):
            measured = True
        elif title and measured and line.startswith("- "):
            lines.append(f"- Study {title} (no verdict rule): {line.removeprefix('- ')}.")
            title = None
    return lines


def glance_section(records: list[Record], extra: list[str] | None = None) -> list[str]:
    """The At a glance section (empty when there is nothing measured)."""
    rows = _arena_rows(records)
    capacity = _capacity_lines(records)
    verdicts = _verdicts(extra or [])
    if not rows and not capacity and not verdicts:
        return []
    lines = [
        "## At a glance",
        "",
        "Per scenario and load (closed loop: wrk's connections; open loop: oha's offered "
        "rate), on each machine: the best configuration by req/s and by p99 (nginx-static, "
        "the ceiling, left out); `A = B`: not significantly different, the order between "
        "them is noise. The margin is the leader against the best configuration outside its "
        "tie group: the ratio of req/s (or p99), its 95 % interval, and whether it is "
        "significant. Detailed tables below.",
        "",
    ]
    by_machine: dict[str, list[list[str]]] = defaultdict(list)
    for _, machine, row in rows:
        by_machine[machine].append(row)
    for machine, machine_rows in by_machine.items():
        if len(by_machine) > 1:
            lines += [f"**{machine}**", ""]
        lines += [*markdown_table(HEADER, machine_rows, "llllrllll"), ""]
    if capacity:
        lines += [*capacity, ""]
    if verdicts:
        lines += [*verdicts, ""]
    return lines
