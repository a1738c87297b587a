"""The summary's first section, "At a glance": per scenario and load, the best
configuration(s), the margin to the next with its significance, and the caveats; per machine,
session, objective and scenario the capacities' race (bench.report.capacities: each round's
capacity paired by round, judged by bench.report.decision); one line per study verdict.

Input: records (and the rendered study sections, for their verdict lines). Output: markdown
lines. Everything comes from the records: nothing here is typed in.
"""

from __future__ import annotations

from collections import Counter, defaultdict

from bench.core.record import Record, flavor_of, of_study
from bench.load import caveat, uses_threads
from bench.report.capacities import CapacityRace, races
from bench.report.cells import figure, host_of, knobs_label, num, session_label, via_label
from bench.report.decision import margin_text
from bench.report.groups import (
    BASELINES,
    arena_key,
    groups,
    is_experiment,
    latency_values,
    quota_label,
    quota_of,
    ranks,
    rps_values,
    starved,
    trial_count,
)
from bench.report.openloop import capacity_cell
from bench.report.stats import Ranked, estimate, pairwise
from bench.report.table import markdown_table

LOAD_SATURATED = 0.9  # the load tool used over 90 % of its threads' CPU
FEW_TRIALS = 3
FIXED_RATE = "not ranked (fixed offered rate)"

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


def _order(members: dict[tuple, list[Record]], ranked: dict[tuple, Ranked], values, higher: bool):
    """The ranked keys, best point estimate first."""

    def center(key: tuple) -> float:
        est = estimate(values(members[key]))
        return est.center if est else 0.0

    return sorted((k for k in members if k in ranked), key=center, reverse=higher)


def _best(order: list[tuple], ranked: dict[tuple, Ranked]) -> list[tuple]:
    """The configurations whose rank interval holds 1: none is significantly better."""
    return [k for k in order if ranked[k].low == 1]


def _names(members: dict[tuple, list[Record]], keys: list[tuple]) -> str:
    names = [_label(members[k][0]) for k in keys]
    if len(names) > 3:
        return " = ".join(names[:3]) + f" = {len(names) - 3} more"
    return " = ".join(names)


def _margin(members: dict[tuple, list[Record]], order: list[tuple], values) -> str:
    """The leader against the runner-up, both by point estimate (chosen before any test),
    from the Holm-corrected family of every pair at this load."""
    if len(order) < 2:
        return "alone" if order else "–"
    # worst first, so that each pair's ratio reads better / worse: leader / runner-up
    family = pairwise({k: values(members[k]) for k in reversed(order)})
    diff = family[(order[1], order[0])]
    if diff.ratio is None:
        return "–"
    interval = f" [{diff.low:.2f}–{diff.high:.2f}]" if diff.low is not None else ""
    if not diff.testable:
        few = min(sum(v is not None for v in values(members[k])) for k in order[:2]) < 2
        word = "untestable (1 trial)" if few else "untestable (identical trials, no spread)"
    else:
        word = "significant" if diff.significant else "not significant"
    return f"{diff.ratio:.2f}×{interval} vs {_label(members[order[1]][0])}, {word}"


def _caveats(group_list: list[list[Record]], apart: list[str]) -> str:
    """The row's caveats: few trials, the configurations ranked apart (`apart`: they left
    connections unserved), a saturated load tool, the load tool's own."""
    notes = []
    records = [r for g in group_list for r in g]
    fewest = min(trial_count(g) for g in group_list)
    if fewest < FEW_TRIALS:
        notes.append(f"{fewest} trial(s): ties cannot be told apart")
    if apart:  # their req/s and p99 count only the connections they served
        notes.append(f"† unserved connections: {', '.join(apart)} ranked apart, never best")
    threads = [
        (r.resources or {}).get("load_cpu_pct", 0) / (100 * (r.load_threads or 1))
        for r in records
        if r.resources and uses_threads(r.load_tool)
    ]
    if threads and max(threads) >= LOAD_SATURATED:
        notes.append(f"load tool near saturation ({max(threads):.0%} of its CPU)")
    notes += sorted({text for r in records if (text := caveat(r.load_tool))})
    return "; ".join(notes) or "–"


def _arena_row(members: dict[tuple, list[Record]], by_rps: dict, by_p99: dict) -> list[str]:
    """One load's row: the best by req/s (closed loop only) and by p99, margins, caveats."""
    first = next(iter(members.values()))[0]
    rps_order = _order(members, by_rps, rps_values, higher=True)
    p99_order = _order(members, by_p99, latency_values, higher=False)
    top_rps, top_p99 = _best(rps_order, by_rps), _best(p99_order, by_p99)
    rps_est = estimate(rps_values(members[rps_order[0]])) if rps_order else None
    p99_est = estimate(latency_values(members[p99_order[0]])) if p99_order else None
    of = f" (of {len(members)})" if len(members) > 1 else ""
    if first.offered_rps is not None:  # achieved req/s at a fixed rate is the tool's pacing
        rps_cells = [FIXED_RATE, "–", "–"]
    else:
        rps_cells = [
            _names(members, top_rps) + of,
            num(rps_est.center if rps_est else None),
            _margin(members, rps_order, rps_values),
        ]
    return [
        first.scenario,
        _load(first),
        *rps_cells,
        (_names(members, top_p99) + (of if first.offered_rps is not None else ""))
        if top_p99
        else "–",
        figure(p99_est.center if p99_est else None),
        _margin(members, p99_order, latency_values) if top_p99 else "–",
        _caveats(
            [members[k] for k in {*top_rps, *top_p99}] or list(members.values()),
            [_label(g[0]) for g in members.values() if starved(g)],
        ),
    ]


def _arena_rows(records: list[Record]) -> list[tuple]:
    candidates = [
        r
        for r in records
        if not r.emulated
        and not of_study(r)
        and "capacity" not in r.metadata
        and not is_experiment(r)
        and r.server not in BASELINES
        # the raw app's rows are details (speed tables, share.md), not a verdict on servers
        and flavor_of(r) == "framework"
    ]
    all_groups = groups(candidates)
    # ranked among the configurations that served their connections (a starved one's req/s
    # and p99 count only the connections it accepted: never "best")
    by_rps, by_p99 = ranks(all_groups, admit=lambda group: not starved(group))
    arenas: dict[tuple, dict[tuple, list[Record]]] = defaultdict(dict)
    for key, group in all_groups.items():
        arenas[arena_key(group[0])][key] = group
    rows = []
    for arena, members in arenas.items():
        first = next(iter(members.values()))[0]
        if not any(k in by_rps or k in by_p99 for k in members):
            continue
        sort_key = (host_of(first), first.scenario, first.load_tool, first.offered_rps or 0.0)
        row = _arena_row(members, by_rps, by_p99)
        rows.append(((*sort_key, first.concurrency, str(arena)), host_of(first), row, first))
    rows.sort(key=lambda row: row[0])
    # Sessions side by side: where one machine measured a load in several sessions, each
    # row names its session (their trials are never pooled nor ranked together).
    seen = Counter((machine, row[0], row[1]) for _, machine, row, _ in rows)
    for _, machine, row, first in rows:
        if seen[(machine, row[0], row[1])] > 1:
            row[1] += f" · {session_label(first)}"
    return [(key, machine, row) for key, machine, row, _ in rows]


def _capacity_line(race: CapacityRace, sessions: bool) -> list[str]:
    """One arena's capacity line: the race's first configuration with its capacity, the
    paired ratio to the next with the race's verdict, the whole ranking, and what would
    decide an undecided pair."""
    ranking = race.ranking()
    idle = "".join(
        f" Not ranked: {_label(e.record)} {capacity_cell(e.capacity)} req/s, knee at "
        f"{e.knee_cpu_pct:.0f} % server CPU (idle: the machine's jitter, not its limit)."
        for e in race.unranked.values()
        if e.knee_cpu_pct is not None
    )
    if not ranking:
        return [f"- Capacity at p99 ≤ {race.objective_ms:g} ms, {race.scenario}:{idle}"]
    best = ranking[0].record
    where = f" ({via_label(best)})" if via_label(best) != "direct" else ""
    quota = quota_of(best)
    where += f" (under a {quota_label(quota)})" if quota is not None else ""
    where += f" · {session_label(best)}" if sessions else ""
    text = (
        f"- Capacity at p99 ≤ {race.objective_ms:g} ms, {race.scenario}{where}: "
        f"**{_label(best)}** {capacity_cell(ranking[0].capacity)} req/s"
    )
    if race.race is None:
        return [text + " (the only configuration searched here: nothing to compare)." + idle]
    pair, nxt = race.pairs()[0], ranking[1]
    interval = f" [{pair.low:.2f}–{pair.high:.2f}]" if pair.low is not None else ""
    if pair.state == "equivalent" and interval:
        interval += f" ({pair.level_text()})"  # TOST's 1 − 2α′ interval: the one it decided on
    state = {
        "separated": "separated",
        "equivalent": f"equivalent within {margin_text(race.race.margin)}",
        "undecided": f"undecided ({pair.reason})",
    }[pair.state]
    how = "decided" if race.race.standing.done else "undecided"
    text += (
        f", {pair.ratio:.2f}×{interval} {_label(nxt.record)} "
        f"({capacity_cell(nxt.capacity)} req/s): {state}; paired by round, {how} in "
        f"{race.race.rounds} round(s): {race.race.standing.line()}.{idle}"
    )
    return [text, *(f"  - {note}" for note in race.race.notes())]


def _capacity_lines(records: list[Record]) -> dict[str, list[str]]:
    """Per machine, per arena (one session, runtime, objective and scenario:
    bench.report.capacities), the capacity line; the arena's session is named where one
    machine searched that objective and scenario in several sessions."""
    found = races(records)
    seen = Counter((r.machine, r.objective_ms, r.scenario) for r in found)
    lines: dict[str, list[str]] = defaultdict(list)
    for race in found:
        several = seen[(race.machine, race.objective_ms, race.scenario)] > 1
        lines[race.machine] += _capacity_line(race, several)
    return dict(lines)


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
        "rate), on each machine: the configurations whose rank interval holds 1 by req/s and "
        "by p99 (none is significantly better; `A = B`: their order is noise). Baselines "
        "(nginx-static, flask-dev) are reference lines, left out; at a fixed offered rate "
        "achieved req/s is the load tool's pacing, so only p99 is ranked. The margin is the "
        "leader against the runner-up, both by point estimate: the ratio of req/s (or p99) "
        "with its interval and significance, Holm-corrected over every pair at that load. "
        "Capacities: `X [lo–hi]`, the 95 % interval over every step; configurations compared "
        "only within one machine, session and runtime, on each round's own capacity paired by "
        "round (the race's verdict: separated, equivalent within ±MARGIN, or undecided). "
        "Detailed tables: the files under Details.",
        "",
    ]
    by_machine: dict[str, list[list[str]]] = defaultdict(list)
    for _, machine, row in rows:
        by_machine[machine].append(row)
    # each machine's capacities under its own heading, never under another machine's
    machines = list(dict.fromkeys([*by_machine, *sorted(capacity)]))
    for machine in machines:
        if len(machines) > 1:
            lines += [f"**{machine}**", ""]
        if by_machine.get(machine):
            lines += [*markdown_table(HEADER, by_machine[machine], "llllrllll"), ""]
        if capacity.get(machine):
            lines += [*capacity[machine], ""]
    if verdicts:
        lines += [*verdicts, ""]
    return lines
