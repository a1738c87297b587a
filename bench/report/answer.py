"""The first screen: one verdict per workload × deployment the records answer, in plain words.

Input: records (stamped with their speed class) and the recommendations made from them
(bench.report.recommend: one decision per workload and deployment). Output: summary.md's
opening section: per machine (and speed class), a table of workload, deployment, the pick with
its knobs, how sure in words (leads whom by how much, tied within a margin, not separated yet
and the run that would decide), and the production checks the pick failed in any round
(every round counted, never the latest trial alone); then one line of what is not measured.
The long table with evidence, lines to paste and what to avoid follows it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

from scipy import stats

from bench.core.outcome import Outcome
from bench.core.record import Record, analysed
from bench.report.cells import host_of, knobs_label, session_label
from bench.report.groups import rps_estimate
from bench.report.plots import MAX_SERIES, answer_figure, save_figure
from bench.report.recommend import (
    ALB,
    WORKLOADS,
    Race,
    Recommendation,
    arenas,
    config_name,
    deployment_runs,
    races,
    recommendations,
)
from bench.report.table import markdown_table

WARN = "⚠"
HEADER = ["workload", "deployment", "pick", "how sure", "production checks"]


def _reload_failures(mine: list[Record]) -> str:
    """Requests failed around a reload, summed over every reload run of the server."""
    runs = [r for r in mine if r.lifecycle is not None and "failed" in r.lifecycle]
    failed = sum(int((r.lifecycle or {}).get("failed") or 0) for r in runs)
    return f"reload: {failed:,} failed in {len(runs)} run(s)" if failed else ""


def _recycle_failures(mine: list[Record]) -> str:
    """Requests unanswered while workers were recycled, summed over every recycling run."""
    runs = [r for r in mine if r.recycles is not None]
    failed = sum(Outcome.of_record(r).unserved for r in runs)
    return f"recycling: {failed:,} failed in {len(runs)} run(s)" if failed else ""


def failed_checks(rec: Recommendation, records: list[Record]) -> list[str]:
    """The production checks the pick failed on its machine, over every round: requests
    failed on reload or under recycling, 502s behind the balancer at its default keep-alive
    (warm-up starts and runs under foreign load left out, as everywhere)."""
    if rec.server is None:
        return []
    mine = [
        r for r in records if r.server == rec.server and host_of(r) == rec.machine and analysed(r)
    ]
    found = [_reload_failures(mine), _recycle_failures(mine)]
    if rec.deployment == ALB and (race := races(records, rec.machine).get(rec.server)):
        found.append(_balancer_check(race.default, races(records, rec.machine).values()))
    return [f for f in found if f]


def _balancer_check(default: tuple[int, int], every: Iterable[Race]) -> str:
    """The pick's 502s behind the balancer at its default keep-alive, over every request the
    race sent: any 502 fails the check; none clears it only when the 95 % upper bound of the
    rate (Clopper-Pearson) is below the worst rate another server showed (0 of 140 is ≤ 2.6 %:
    too few requests to tell it from a server that loses 1 in 40)."""
    lost, sent = default
    if lost:
        return f"{lost:,} 502s in {sent:,} requests at its default keep-alive"
    if not sent:
        return ""
    bound = stats.binomtest(0, sent).proportion_ci(0.95, "exact").high
    worst = max((r.default[0] / r.default[1] for r in every if r.default[1]), default=0.0)
    if worst and bound >= worst:
        return (
            f"0 502s in {sent:,} requests: ≤ {bound * 100:.1f} % (95 %), not below the worst "
            f"server's {worst * 100:.1f} %: too few requests to clear it"
        )
    return ""


def _pick(rec: Recommendation) -> str:
    if rec.server is None:
        return "–"
    label = knobs_label(rec.knobs)
    if "keepalive" in rec.knobs:
        label += f" ka{rec.knobs['keepalive']}"
    return f"{rec.server} {label}".strip()


def _row(rec: Recommendation, records: list[Record]) -> list[str]:
    failed = failed_checks(rec, records)
    pick = _pick(rec)
    if failed and pick != "–":
        pick = f"{WARN} {pick}"
    cells = [rec.workload, rec.deployment, pick, rec.sure or "–", "; ".join(failed) or "none"]
    return [c.replace("|", "\\|") for c in cells]


# The first screen's chart, below RESULTS (one per result set: the first machine's rows).
CHART = "plots/answer.png"


def chart_panels(records: list[Record]) -> list[tuple[str, dict[str, tuple]]]:
    """Per workload of the first machine (one speed class: the machine label carries it), the
    configurations at the highest load of one session, best first, in the first deployment
    of the rows (direct before nginx, the front and a quota): label -> (req/s, interval)."""
    recs, _ = recommendations(records)
    if not recs:
        return []
    machine = recs[0].machine
    panels = []
    for workload in dict.fromkeys(r.workload for r in recs if r.machine == machine):
        rows = [r for r in recs if (r.machine, r.workload) == (machine, workload)]
        deployment, pick = rows[0].deployment, rows[0].server
        runs = deployment_runs(records, machine, WORKLOADS[workload], deployment)
        # the arenas where servers met (a knob sweep of one server chooses no server), the
        # row's pick among them first, then the highest load, then the most configurations
        found = [a for a in arenas(runs) if len({g[0].server for g in a.members.values()}) > 1]
        if not found:
            continue
        top = max(
            found,
            key=lambda a: (
                any(g[0].server == pick for g in a.members.values()),
                a.first.concurrency,
                len(a.order),
            ),
        )
        values = {}
        for key in top.order[:MAX_SERIES]:
            est = rps_estimate(top.members[key])
            if est is None:
                continue
            spread = (est.low, est.high) if est.low is not None and est.high is not None else None
            values[config_name(top.members[key][0])] = (est.center, spread)
        title = (
            f"{workload} · {deployment} · c{top.first.concurrency} ({top.first.load_tool}) · "
            f"{session_label(top.first)}"
        )
        panels.append((title, values))
    return panels


def write_chart(records: list[Record], results_dir: Path) -> str | None:
    """plots/answer.png from chart_panels, or None (and no file) when there is nothing to
    draw; the path relative to results_dir."""
    panels = chart_panels(records)
    path = results_dir / CHART
    if not panels:
        path.unlink(missing_ok=True)
        return None
    save_figure(answer_figure(panels), path)
    return CHART


def answer_section(records: list[Record], chart: str | None = None) -> list[str]:
    """summary.md's opening section: the verdict table per machine, the chart (`chart`: its
    path, write_chart), then what is not measured ([] when no workload was measured: the
    sections below say what the records hold)."""
    recs, missing = recommendations(records)
    if not recs:
        return []
    by_machine: dict[str, list[Recommendation]] = defaultdict(list)
    for rec in recs:
        by_machine[rec.machine].append(rec)
    lines = ["## The answer", ""]
    for machine, rows in by_machine.items():
        if len(by_machine) > 1:
            lines += [f"**{machine}**", ""]
        lines += [*markdown_table(HEADER, [_row(r, records) for r in rows], "lllll"), ""]
    lines.append(
        f"{WARN}: the pick failed a production check in some round, or its runs were too few to "
        "clear one (the column says which; "
        "[production](details/production.md) has every run). The evidence, the lines to paste "
        "and what to avoid: Recommendations below."
    )
    if chart:
        lines += ["", f"![Each workload's configurations at its highest load, best first]({chart})"]
    unmeasured = [f"{m}: {'; '.join(items)}" for m, items in missing.items()]
    if unmeasured:
        lines += ["", "Not measured: " + " · ".join(unmeasured) + "."]
    return [*lines, ""]
