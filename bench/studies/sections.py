"""summary.md's study sections: one renderer for every study.

Input: every record (those with metadata.study count; the latest study_run of each study)
and the study files. Output: markdown lines, a section per study that has records: the
judged studies first (claim, verdict per load model, results beside the published figures,
a plot; a study in network namespaces: its verdict above its arm tables and counts, from
bench.studies.network), then the studies described by `expect` (their arm tables), then the
defaults behind a load balancer when the race ran.
"""

from __future__ import annotations

import textwrap
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

from bench.core.record import NEVER_RECYCLED, Record, never_recycled
from bench.report.cells import figure, host_of
from bench.report.decision import margin_text
from bench.report.groups import starved
from bench.report.plots import Panel, plot_study
from bench.report.production import quota_bound
from bench.report.table import markdown_table
from bench.studies import network
from bench.studies.arms import best_arms
from bench.studies.container import per_server_lines
from bench.studies.metrics import (
    METRICS,
    Cell,
    fraction_rates,
    latest_run,
    measured,
    per_arm,
    runs_text,
)
from bench.studies.schema import (
    NOT_RUN_KEYS,
    Study,
    StudyError,
    in_namespace,
    load_study,
    study_names,
)
from bench.studies.searched import search_lines
from bench.studies.verdict import Outcome, outcomes, settings_of
from bench.studies.verdict import verdict as verdict_of


def _published_cell(study: Study, arm: str, scenario: str, conc: int, metric: str) -> str:
    for fig in study.published:
        if (
            fig.get("arm") == arm
            and fig.get("metric") == metric
            and fig.get("concurrency", conc) == conc
            and fig.get("scenario", scenario) == scenario
        ):
            value = fig.get("value")
            return str(fig.get("text")) if value is None else figure(float(value))
    return ""


def collapse_groups(study: Study, records: list[Record]) -> tuple[list[Record], list[str]]:
    """With best_by: per group of arms (a server's worker sweep), only the best arm's records,
    relabelled as the group; and a line per group saying what the sweep gave."""
    if not study.best_by:
        return records, []
    groups = {a.id: str(a.settings["group"]) for a in study.arms if "group" in a.settings}
    values = per_arm(records, study.best_by)
    best = best_arms(study, records)
    sweep: dict[str, list[str]] = defaultdict(list)
    labels = {a.id: a.label for a in study.arms}
    for arm_id, group in groups.items():
        if values.get(arm_id) is None:
            sweep[group].append(f"{arm_id} failed")
        else:
            sweep[group].append(f"{arm_id} {figure(values[arm_id])}")
    kept = []
    for rec in records:
        arm = str(rec.metadata.get("study_arm"))
        group = groups.get(arm)
        if group is None:
            kept.append(rec)
        elif group in best and best[group].arm == arm:
            kept.append(replace(rec, metadata={**rec.metadata, "study_arm": group}))
    lines = [
        f"- {group}: best {labels[best[group].arm]} ({METRICS[study.best_by]}: "
        f"{', '.join(sweep[group])})"
        if group in best
        else f"- {group}: every arm failed"
        for group in dict.fromkeys(groups.values())
    ]
    return kept, lines


def _run_line(verdict: str, records: list[Record], family: int) -> str:
    host = ", ".join(sorted({host_of(r) for r in records}))
    started = min(str(r.metadata.get("started_at", "")) for r in records)
    trials = len({r.trial for r in records if r.trial > 0})  # trial 0: the warm-up start
    margin, looks = settings_of(records)
    raced = (
        f"raced (TRIALS=auto: rounds until every check was decided or the budget ended, the "
        f"error spent over up to {looks} looks)"
        if looks
        else "a fixed number of rounds"
    )
    rounds = f"{'up to ' if looks else ''}{trials} round{'s' if trials != 1 else ''}"
    rule = (
        "each check decided on its two arms' within-round ratios (paired), separated or "
        f"equivalent within {margin_text(margin)} (a ratio: within or outside its band), "
        f"counts by an exact test, Holm over the study's {family} checks; otherwise "
        "inconclusive with the reason; one trial decides nothing"
    )
    return (
        f"**Verdict: {verdict}** ({runs_text(records)} on {host}, {len(records)} runs from "
        f"{started}, {rounds} (trials) per arm, {raced}; rule: {rule})."
    )


def _closed_label(records: list[Record]) -> str:
    """How the closed-loop arms were loaded, from their records: `closed loop (wrk, 50
    connections)`."""
    closed = [r for r in records if r.offered_rps is None]
    tools_used = ", ".join(sorted({r.load_tool for r in closed})) or "?"
    conns = ", ".join(str(c) for c in sorted({r.concurrency for r in closed}))
    return f"closed loop ({tools_used}, {conns} connections)"


def _open_label(records: list[Record]) -> str:
    """How the open-loop arms were loaded: at equal derived rates, or at fixed ones."""
    opened = [r for r in records if r.offered_rps is not None]
    tools_used = ", ".join(sorted({r.load_tool for r in opened})) or "?"
    if any(r.metadata.get("study_rates") for r in opened):
        return f"open loop ({tools_used}) at equal offered rates"
    rates = " and ".join(figure(x) for x in sorted({r.offered_rps or 0.0 for r in opened}))
    fresh = any((r.keepalive or {}).get("client") is False for r in opened)
    return f"open loop ({tools_used}) at {rates} req/s" + (
        ", a new connection per request" if fresh else ""
    )


def _why_changed(study: Study, records: list[Record]) -> str:
    """Why the load models can disagree, in this run's figures."""
    closed = [r for r in records if r.offered_rps is None and r.status == "ok"]
    opened = [r for r in records if r.offered_rps is not None and r.status == "ok"]
    labels = {a.id: a.label for a in study.arms}
    order = [str(a.settings.get("group", a.id)) for a in study.arms]
    rps = per_arm(closed, "rps")
    paced = ", ".join(
        f"{labels.get(arm, arm)} {figure(rps[arm])}"
        for arm in sorted(rps, key=lambda a: order.index(a) if a in order else len(order))
        if rps[arm] is not None
    )
    closed_part = (
        "closed loop, each connection waited for its answer before sending again, so every "
        f"arm ran at the pace it set itself (req/s: {paced}) and the latency covers only the "
        "requests it sent"
    )
    basis = next(
        (r.metadata["study_rate_basis"] for r in opened if "study_rate_basis" in r.metadata), None
    )
    rates = next((r.metadata["study_rates"] for r in opened if "study_rates" in r.metadata), None)
    if basis and rates:
        offered = ", ".join(
            f"{figure(float(rate))} ({_percent(f)})" for f, rate in sorted(rates.items())
        )
        open_part = (
            f"open loop, every arm was offered the same {offered} req/s of "
            f"{basis['group']}'s best {figure(float(basis['rps']))} req/s (the slowest server, "
            "measured above), with latency counted from each request's intended send time"
        )
    else:
        offered = " and ".join(figure(x) for x in sorted({r.offered_rps or 0.0 for r in opened}))
        open_part = (
            f"open loop, requests arrived at {offered} req/s whatever the server did, as a "
            "load balancer sends them, and latency counts from each intended send time"
        )
    return f"Why: {closed_part}; {open_part}."


def _changed_checks(closed: list[Outcome], opened: list[Outcome]) -> list[str]:
    """A line per open-loop check that re-judges a closed-loop one with another outcome."""
    by_id = {o.check["id"]: o for o in closed if "id" in o.check}
    lines = []
    for outcome in opened:
        before = by_id.get(outcome.check.get("rejudges"))
        if before is not None and before.result != outcome.result:
            lines.append(
                f"- {before.check.get('describe', before.check['metric'])}: {before.held} "
                f"closed loop, {outcome.held} open loop "
                f"({outcome.check.get('describe', outcome.check['metric'])})"
            )
    return lines


def _two_model_lines(study: Study, records: list[Record]) -> tuple[list[str], list[str]]:
    """Verdict per load model, the checks of each, and which verdict changed and why; and
    the verdicts."""
    family = len(study.checks)
    found = outcomes(study, records)  # one family: every check of the study
    closed = [o for o in found if not study.check_is_open(o.check)]
    opened = [o for o in found if study.check_is_open(o.check)]
    if not closed:
        # Every arm is open loop (the production studies): one load model, one verdict.
        word = verdict_of(opened)
        label = f"{_open_label(records)}: {word}"
        return [_run_line(label, records, family), "", *(o.line for o in opened), ""], [word]
    if not any(r.offered_rps is not None for r in records):
        # Records from before the study had open-loop arms: the closed-loop verdict alone.
        return [
            _run_line(verdict_of(closed), records, family),
            "",
            *(o.line for o in closed),
            "",
            f"Open loop: not in this run (`make study NAME={study.name}` runs it).",
            "",
        ], [verdict_of(closed)]
    closed_verdict, open_verdict = verdict_of(closed), verdict_of(opened)
    closed_label, open_label = _closed_label(records), _open_label(records)
    both = f"{closed_label}: {closed_verdict}; {open_label}: {open_verdict}"
    run_line = _run_line(both, records, family)
    lines = [run_line, ""]
    lines += [f"{closed_label.capitalize()}:", "", *(o.line for o in closed), ""]
    lines += [f"{open_label.capitalize()}:", "", *(o.line for o in opened), ""]
    changed = _changed_checks(closed, opened)
    why = _why_changed(study, records)
    if closed_verdict != open_verdict:
        lines += [
            f"The load model changes the verdict: {closed_verdict} closed loop, "
            f"{open_verdict} open loop. {why}",
            "",
        ]
    else:
        lines += [f"The load model does not change the verdict: {closed_verdict} under both.", ""]
    if changed:
        lines += ["Checks whose outcome changed with the load model:", "", *changed, ""]
        lines += [why, ""] if closed_verdict == open_verdict else []
    return lines, [closed_verdict, open_verdict]


def _verdict_lines(study: Study, records: list[Record], why: bool = True) -> list[str]:
    """The verdict with the run it rests on (per load model where the study has two), a line
    per check, and (`why`) why it may differ."""
    if any(a.open_loop for a in study.arms):
        lines, verdicts = _two_model_lines(study, records)
    else:
        found = outcomes(study, records)
        verdict = verdict_of(found)
        run_line = _run_line(verdict, records, len(study.checks))
        lines, verdicts = [run_line, "", *(o.line for o in found), ""], [verdict]
    if why and any(v != "reproduced" for v in verdicts):
        lines += [f"Why it may differ: {study.differs}", ""]
    return lines


def _ordered_cells(study: Study, values: dict[str, dict[Cell, float | None]]) -> list[Cell]:
    """Every measured cell, arms (or their groups) in the file's order, then the rest."""
    order = list(dict.fromkeys([*(str(a.settings.get("group", a.id)) for a in study.arms)]))
    return sorted(
        {c for v in values.values() for c in v},
        key=lambda c: (
            order.index(c[0]) if c[0] in order else len(order),
            c[0],
            c[1],
            c[2],
            c[3] or 0,
        ),
    )


def _results_header(
    metrics: tuple[str, ...], with_published: set[str | None], first: list[str]
) -> list[str]:
    """The results table's header: a published column beside ours where the source has one."""
    header = list(first)
    for metric in metrics:
        if metric in with_published:
            header.append(f"{METRICS[metric]} (published)")
        header.append(f"{METRICS[metric]} (ours)")
    return header


def _arm_labels(study: Study, records: list[Record]) -> dict[str, str]:
    labels = {a.id: a.label for a in study.arms}
    labels |= {
        str(a.settings["group"]): str(a.settings["group"])
        for a in study.arms
        if "group" in a.settings
    }
    for rec in records:  # a second-phase arm: which sweep arm it took the knobs of
        source = rec.metadata.get("study_knobs_from")
        arm = str(rec.metadata.get("study_arm"))
        if source and arm in labels and not labels[arm].endswith(")"):
            labels[arm] = f"{labels[arm]} (knobs of {source})"
        searched = rec.metadata.get("study_tuned")  # a tuned arm: what its search chose
        if isinstance(searched, dict) and arm in labels and not labels[arm].endswith(")"):
            chosen = (searched.get("recommended") or {}).get("label")
            labels[arm] = f"{labels[arm]} (tuned: {chosen})"
    for rec in records:  # a recycling arm in which no worker was started: not measured
        arm = str(rec.metadata.get("study_arm"))
        if never_recycled(rec) and arm in labels and NEVER_RECYCLED not in labels[arm]:
            labels[arm] = f"{labels[arm]} ({NEVER_RECYCLED})"
    return labels | _quota_as_run(study, records, labels)


def _quota_as_run(study: Study, records: list[Record], labels: dict[str, str]) -> dict[str, str]:
    """Labels of arms whose records ran under another CPU quota than the file sets now (the
    file's label names its quota): the quota the records carry, so an older run is never
    shown under the new figure."""
    changed = {}
    for rec in records:
        arm = study.arm(str(rec.metadata.get("study_arm")))
        ran = (rec.cgroup or {}).get("cpu_quota")
        if arm is None or ran is None or arm.id in changed:
            continue
        if float(ran) != study.settings(arm).get("cpu_quota"):
            changed[arm.id] = f"{labels[arm.id]} (this run: a {float(ran):g}-CPU quota)"
    return changed


def _percent(fraction: str) -> str:
    """A fraction as written ("0.8") as a percentage ("80 %")."""
    return f"{float(fraction) * 100:g} %"


def _offered_cell(rec_rates: dict[tuple[str, str], float], arm: str, offered: float) -> str:
    fraction = next((f for (a, f), r in rec_rates.items() if a == arm and r == offered), None)
    return figure(offered) + (f" ({_percent(fraction)})" if fraction else "")


def _bound_text(records: list[Record], cell: Cell) -> str:
    """Whether the CPU quota bound in a cell's trials (throttled time > 0): yes, no, or in
    how many of them."""
    bound = [
        quota_bound(r)
        for r in records
        if r.status == "ok"
        and (str(r.metadata.get("study_arm")), r.scenario, r.concurrency, r.offered_rps) == cell
    ]
    known = [b for b in bound if b is not None]
    if not known:
        return "–"
    if all(known) or not any(known):
        return "yes" if known[0] else "no (0 ms throttled)"
    return f"in {sum(known)} of {len(known)} trials"


def _results_table(study: Study, records: list[Record]) -> list[str]:
    """Per arm, route and concurrency (and offered rate, open loop), the study's metrics:
    published beside ours. Closed- and open-loop arms in tables of their own."""
    closed = [r for r in records if r.offered_rps is None]
    opened = [r for r in records if r.offered_rps is not None]
    labels = _arm_labels(study, records)
    # A "published" column only where the source gave figures for that metric.
    with_published = {fig.get("metric") for fig in study.published}
    paths = {r.scenario: r.path for r in records}
    lines: list[str] = []
    for part, metrics in ((closed, study.metrics), (opened, study.open_metrics)):
        if not part:
            continue
        values = {m: measured(part, m) for m in metrics}
        first = (
            ["arm", "route", "conc."]
            if part is closed
            else ["arm", "route", "conn.", "offered req/s"]
        )
        header = _results_header(metrics, with_published, first)
        # Under a CPU quota: whether it bound, beside the figures it is meant to explain.
        quota = any(quota_bound(r) is not None for r in part)
        header += ["quota bound"] if quota else []
        rates = fraction_rates(part)
        rows = []
        for arm, scenario, conc, offered in _ordered_cells(study, values):
            row = [labels.get(arm, arm), f"`{paths.get(scenario, scenario)}`", str(conc)]
            if offered is not None:
                row.append(_offered_cell(rates, arm, offered))
            for metric in metrics:
                if metric in with_published:
                    row.append(_published_cell(study, arm, scenario, conc, metric))
                row.append(figure(values[metric].get((arm, scenario, conc, offered))))
            if quota:
                row.append(_bound_text(part, (arm, scenario, conc, offered)))
            rows.append(row)
        if lines:
            lines.append("")
        if opened:
            lines += [
                f"{(_closed_label if part is closed else _open_label)(records).capitalize()}:",
                "",
            ]
        align = "ll" + "r" * (len(header) - 2 - quota) + "l" * quota
        lines += markdown_table(header, rows, align)
    return lines


def not_run_table(study: Study) -> list[str]:
    """The source's configurations that cannot run today, with what runs instead."""
    if not study.not_run:
        return []
    header = ["published, not run here", "published", "why not run", "measured instead"]
    rows = [[str(e[k]) for k in NOT_RUN_KEYS] for e in study.not_run]
    return ["", *markdown_table(header, rows, "llll")]


def _failed_lines(records: list[Record]) -> list[str]:
    """A line naming the first failed runs and why, when any failed."""
    failed = [r for r in records if r.status != "ok"]
    if not failed:
        return []
    return [
        "",
        f"{len(failed)} run(s) failed: "
        + "; ".join(
            f"{r.metadata.get('study_arm')} c={r.concurrency}"
            + (f" at {figure(r.offered_rps)} req/s" if r.offered_rps is not None else "")
            + f": {textwrap.shorten(r.reason or '', 120, placeholder=' …')}"
            for r in failed[:5]
        ),
    ]


def study_section(study: Study, records: list[Record], plot: str | None) -> list[str]:
    """The summary section of one study, from its latest run's records."""
    records, sweep_lines = collapse_groups(study, records)
    lines = [f"## Study: {study.name} — {study.title}", ""]
    lines += [f"Source document `{study.source}`. Claimed: {study.claim}", ""]
    if not records:
        return [*lines, f"Not run yet: `make study NAME={study.name}`.", ""]
    lines += _verdict_lines(study, records)
    if plot:
        lines += [f"![{study.name}]({plot})", ""]
    if sweep_lines:
        lines += ["Worker sweep (the best of each server is kept below):", "", *sweep_lines, ""]
    lines += search_lines(_arm_labels(study, records), records)
    lines += _results_table(study, records)
    per_server = per_server_lines(study, records)
    lines += ["", *per_server] if per_server else []
    lines += not_run_table(study)
    lines += _failed_lines(records)
    return [*lines, ""]


def study_series(study: Study, records: list[Record]) -> list[Panel]:
    """Plot data: a panel per metric the verdict's checks judge (per load model), each arm
    (and route) a series of the metric by concurrency, or by offered rate open loop."""
    labels = {a.id: a.label for a in study.arms}
    hungry = starved_arms(records)
    starved_labels = frozenset(labels.get(arm, arm) for arm in hungry)
    panels = []
    for opened in (False, True):
        part = [r for r in records if (r.offered_rps is not None) == opened]
        judged = [c["metric"] for c in study.checks if study.check_is_open(c) == opened]
        metrics = list(dict.fromkeys(judged or ([] if opened else [study.plot_metric])))
        for metric in metrics if part else []:
            panels += _metric_panels(metric, measured(part, metric), labels, opened, starved_labels)
    return panels


def starved_arms(records: list[Record]) -> set[str]:
    """The arms that left connections unserved at some route and concurrency (closed loop,
    bench.report.groups.starved): their p99 times only the requests they accepted."""
    cells: dict[tuple, list[Record]] = defaultdict(list)
    for rec in records:
        if rec.status == "ok" and rec.offered_rps is None:
            cells[(str(rec.metadata.get("study_arm")), rec.scenario, rec.concurrency)].append(rec)
    return {arm for (arm, _, _), group in cells.items() if starved(group)}


def _metric_panels(
    metric: str,
    values: dict,
    labels: dict[str, str],
    opened: bool,
    starved_labels: frozenset[str] = frozenset(),
) -> list[Panel]:
    """One metric's panels: several routes get a panel each (small multiples); a starved
    arm's series is marked (Panel.starved) in every panel it appears in."""
    routes = sorted({scenario for _, scenario, _, _ in values})
    panels = []
    for route in routes:
        series: dict[str, list[tuple]] = defaultdict(list)
        for (arm, scenario, conc, offered), value in values.items():
            if scenario == route:
                series[labels.get(arm, arm)].append((offered if opened else conc, value))
        name = METRICS[metric] + (" (open loop)" if opened else "")
        name += f", {route}" if len(routes) > 1 else ""
        x_label = "offered req/s" if opened else "concurrency (connections)"
        panels.append(Panel(name, x_label, dict(series), starved_labels & set(series)))
    return panels


def _sections_of(name: str, records: list[Record], results_dir: Path | None) -> list[str]:
    """One study's section from its latest run, with its plot (judged studies)."""
    try:
        study = load_study(name)
    except StudyError as exc:
        return [f"## Study: {name}", "", f"The study file cannot be read: {exc}", ""]
    if not study.judged or any(in_namespace(study.settings(a)) for a in study.arms):
        # Namespace studies: their arm tables and counts; the verdict of their checks (the
        # same function as every study's), where they have any, above them.
        verdict = _verdict_lines(study, records, why=False) if study.judged else []
        return network.study_section(study, records, verdict)
    plot = None
    panels = study_series(study, records)
    if results_dir is not None and any(p.series for p in panels):
        path = results_dir / "plots" / f"study-{name}.png"
        plot_study(study.title, panels, path)
        plot = str(path.relative_to(results_dir))
    return study_section(study, records, plot)


def _judged_first(name: str) -> tuple[bool, str]:
    """Sections in order: judged studies (and unreadable files), then described ones."""
    try:
        return (not load_study(name).judged, name)
    except StudyError:
        return (False, name)


def _declared(name: str) -> tuple[str, ...] | None:
    """The arm ids a study file declares (None: the file cannot be read)."""
    try:
        return tuple(a.id for a in load_study(name).arms)
    except StudyError:
        return None


def summary_sections(records: list[Record], results_dir: Path | None = None) -> list[str]:
    """Sections for every study that has records (latest run of each), with plots; then the
    defaults behind a load balancer, when the race ran."""
    lines: list[str] = []
    ran = {name: latest_run(records, name, _declared(name)) for name in study_names()}
    for name in sorted((n for n in ran if ran[n]), key=_judged_first):
        lines += _sections_of(name, ran[name], results_dir)
    return lines + network.defaults_section(records)
