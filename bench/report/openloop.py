"""The summary's open-loop sections: runs at fixed arrival rates (LOAD=oha) per scenario,
each server's capacity at a latency objective (make capacity), and the knee plots.

Input: every record and the results directory (each trial's percentiles from its record; a
single trial's per-request file, kept beside it by its load tool (bench.load), for a
within-run interval). Output: markdown lines and the knee plots
RESULTS/plots/knee-<scenario>-<objective>.png with each capacity's crossing marked.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from pathlib import Path

from bench.core.outcome import Outcome
from bench.core.parse import ParseError
from bench.core.record import Record, analysed, is_warmup, of_study, session_of
from bench.core.scenario import SCENARIOS
from bench.load import per_request_files, read_per_request_ms
from bench.report.cells import (
    figure,
    host_of,
    knobs_label,
    machine,
    median,
    num,
    section_value,
    via_label,
)
from bench.report.groups import is_experiment, latency_values, trial_count
from bench.report.plots import Knee, plot_knee
from bench.report.stats import Capacity, block_for, capacity, estimate, within_run_interval
from bench.report.table import markdown_table

LATENCY_NOTE = (
    "Latency here is measured by oha from each request's intended send time (`-q` with "
    "`--latency-correction`): time a request waited because the server stalled counts, as it "
    "would for a user. (wrk's percentiles in the closed-loop tables are its own post-hoc "
    "estimate, `stats_correct`, over the requests it did send.)"
)
RATE_HEADER = [
    "server",
    "knobs",
    "via",
    "offered req/s",
    "achieved req/s",
    "p50 ms",
    "p90 ms",
    "p99 ms [95 % CI over trials]",
    "p99.9 ms",
    "max ms",
    "failed",
    "unsent",
    "server CPU %",
    "oha CPU %",
    "trials",
    "machine",
]
CAPACITY_HEADER = [
    "server",
    "knobs",
    "capacity req/s [95 % CI]",
    "trials at the knee",
    "errors from req/s",
    "p99 ms at 50 %",
    "p99 ms at 80 %",
    "at 120 %: achieved, p99 ms, failed, overflows",
    "at 150 %: achieved, p99 ms, failed, overflows",
    "steps",
    "machine",
]
PROFILE_FACTORS = {"50": 0.5, "80": 0.8}
PAST_NOTE = (
    "◇: this rate past the search's result met the objective: near the knee a step's p99 "
    "varies from one step to the next, which is why the capacity is the crossing over "
    "repeated steps with an interval, not the search's last confirmed rate."
)
CAPACITY_NOTE = (
    "Capacity: every step is a trial at its offered rate; the share of trials that met the "
    "objective, made non-increasing in the rate, crosses 1/2 at the capacity (interpolated on "
    "log rate); the 95 % interval is a bootstrap over each rate's trials, never narrower than "
    "the highest rate where every trial passed and the lowest where every trial failed. "
    "Trials at the knee: the steps between those two rates."
)
IDLE_NOTE = (
    "⚐: the objective failed while the server was idle (its median CPU over the steps at the "
    "knee under half of one CPU): the knee is not the server's limit but the machine's "
    "jitter (or a wait the scenario makes); not ranked as a capacity."
)
BRACKET_NOTE = (
    "‡: no rate around the crossing was stepped 3 times (a search without repeats at the "
    "knee, or with TRIALS below 3): the interval rests on single steps, and a repeat may "
    "land outside it."
)


def idle_knee(cpu_pct: float | None, scenario: str) -> bool:
    """Whether a capacity's knee came with the server idle (its median CPU at the knee under
    IDLE_KNEE_CPU_PCT of one CPU): not the server's limit but the machine's jitter. Never on a
    route whose requests wait in the worker (bench.core.scenario's `waits`: /sleep,
    /upstream), where the knee is the workers over the wait, reached idle by construction."""
    spec = SCENARIOS.get(scenario)
    waits = spec is not None and spec.waits
    return cpu_pct is not None and cpu_pct < IDLE_KNEE_CPU_PCT and not waits


def failed_requests(rec: Record) -> int:
    """Requests without a 2xx answer, arrivals never sent included (bench.core.outcome)."""
    return Outcome.of_record(rec).failed


def is_open_loop(rec: Record) -> bool:
    """A run at a fixed offered rate."""
    return rec.offered_rps is not None


def _per_request(results: Path, rec: Record) -> list[float] | None:
    """One run's per-request latencies in intended-send order (None without the file)."""
    files = [results / n for n in per_request_files(rec.load_tool, rec.raw_files)]
    if len(files) != 1 or not files[0].exists():
        return None
    try:
        return read_per_request_ms(files[0])
    except ParseError:
        return None


def _p99_cell(results: Path, group: list[Record]) -> str:
    """p99 over trials (the geometric mean of each run's p99 and its t interval); a single
    run gets a within-run block-bootstrap interval, labelled so, or none."""
    est = estimate(latency_values(group, "p99"))
    if est is None:
        return "–"
    if est.low is not None and est.high is not None:
        return f"{figure(est.center)} [{figure(est.low)}–{figure(est.high)}]"
    series = _per_request(results, group[0]) if len(group) == 1 else None
    within = within_run_interval(series, 0.99, block_for(group[0].offered_rps)) if series else None
    if within is None:
        return figure(est.center)
    return f"{figure(est.center)} [{figure(within[1])}–{figure(within[2])} within-run]"


def _latency_cells(results: Path, group: list[Record]) -> list[str]:
    """Each percentile as the geometric mean of the trials' own percentiles."""
    cells = []
    for key in ("p50", "p90", "p99", "p999", "max"):
        if key == "p99":
            cells.append(_p99_cell(results, group))
            continue
        est = estimate(latency_values(group, key))
        cells.append(figure(est.center) if est else "–")
    return cells


def _rate_row(results: Path, group: list[Record]) -> list[str]:
    first = group[0]
    return [
        first.server,
        knobs_label(first.knobs or {}),
        via_label(first),
        num(first.offered_rps),
        num(median([r.achieved_rps for r in group])),
        *_latency_cells(results, group),
        num(sum(failed_requests(r) for r in group)),
        num(sum(int((r.errors or {}).get("unsent") or 0) for r in group)),
        num(median([section_value(r, "resources", "server_cpu_pct") for r in group])),
        num(median([section_value(r, "resources", "load_cpu_pct") for r in group])),
        str(trial_count(group)),
        machine(first),
    ]


def rate_section(scenario: str, records: list[Record], results: Path) -> list[str]:
    """Fixed-rate runs of one scenario (not capacity steps): a row per configuration and
    offered rate, latencies over every trial's requests."""
    groups: dict[tuple, list[Record]] = defaultdict(list)
    for rec in records:
        if analysed(rec):
            key = (rec.server, tuple(sorted((rec.knobs or {}).items())), via_label(rec))
            scope = (host_of(rec), session_of(rec))
            groups[(*key, rec.offered_rps, rec.concurrency, *scope)].append(rec)
    if not groups:
        return []
    rows = [_rate_row(results, groups[key]) for key in sorted(groups, key=str)]
    path = records[0].path
    return [
        f"### {scenario} (`{path}`) at fixed rates",
        "",
        *markdown_table(RATE_HEADER, rows, "lllrrrrrrrrrrrrl"),
        "",
    ]


def _step_cells(steps: list[Record], phase: str, factor: float, found: float) -> str:
    target = round(found * factor)
    match = [s for s in steps if s.metadata["capacity"]["phase"] == phase and s.offered_rps]
    match = [s for s in match if abs((s.offered_rps or 0) - target) <= 1]
    if not match:
        return "–"
    rec = match[-1]
    p99 = (rec.latency_ms or {}).get("p99")
    overflows = section_value(rec, "sockets", "listen_overflows")
    cell = f"{num(rec.achieved_rps)}, {figure(p99)}, {num(failed_requests(rec))}, {num(overflows)}"
    # A rate past capacity that meets the objective: the knee is noisy here (short steps on
    # shared CPUs), the capacity a lower bound.
    return cell + (" ◇" if rec.metadata["capacity"].get("passed") else "")


# Under half of one CPU at the knee (resources.server_cpu_pct, 100 = one CPU): the servers
# this suite's capacities compare use one CPU or more at theirs on a 2-CPU machine shared
# with the load tool (granian ~110 %, gunicorn-sync 70-100 % on /db), nginx-static 18 %.
IDLE_KNEE_CPU_PCT = 50.0


def knee_cpu_pct(steps: list[Record], cap: Capacity) -> float | None:
    """The server's median CPU (% of one CPU) over the steps at the knee: those whose offered
    rate lies within the capacity's 95 % interval. None: no capacity or no CPU figure."""
    if cap.center is None or cap.low is None or cap.high is None:
        return None
    cpu = [
        float(step.resources["server_cpu_pct"])
        for step in steps
        if step.offered_rps is not None
        and cap.low <= step.offered_rps <= cap.high
        and (step.resources or {}).get("server_cpu_pct") is not None
    ]
    return statistics.median(cpu) if cpu else None


def capacity_cell(cap: Capacity, passed_max: float | None = None) -> str:
    """`2,950 [2,900–3,100]`, the capacity and its 95 % interval, or why there is none."""
    if cap.center is None:
        if cap.below:
            return "below every rate tried"
        return f"not reached (≥ {num(passed_max)} passed)" if passed_max else "–"
    cell = f"{num(cap.center)} [{num(cap.low)}–{num(cap.high)}]"
    return cell + (" ‡" if cap.bracket_only else "")


def _capacity_row(steps: list[Record]) -> list[str]:
    first = steps[0]
    found = capacity_found(steps)
    cap = capacity_estimate(steps)
    erring = [s.offered_rps for s in steps if s.status == "ok" and failed_requests(s) > 0]
    profile = []
    for factor in PROFILE_FACTORS.values():
        match = [
            s
            for s in steps
            if found
            and s.metadata["capacity"]["phase"] == "profile"
            and abs((s.offered_rps or 0) - round(found * factor)) <= 1
        ]
        profile.append(figure((match[-1].latency_ms or {}).get("p99")) if match else "–")
    passed = [s.offered_rps for s in steps if s.metadata["capacity"].get("passed")]
    cpu = knee_cpu_pct(steps, cap)
    idle = f" ⚐ knee at {cpu:.0f} % CPU" if idle_knee(cpu, first.scenario) else ""
    return [
        first.server,
        knobs_label(first.knobs or {}),
        capacity_cell(cap, max(passed, default=None)) + idle,
        str(cap.trials_at_knee) if cap.center is not None else "–",
        num(min(erring)) if erring else "none seen",
        *profile,
        _step_cells(steps, "past", 1.2, found) if found else "–",
        _step_cells(steps, "past", 1.5, found) if found else "–",
        str(len(steps)),
        machine(first),
    ]


def capacity_outcomes(steps: list[Record]) -> dict[float, list[bool]]:
    """Each offered rate's step verdicts (every phase: a step is a trial at its rate)."""
    outcomes: dict[float, list[bool]] = defaultdict(list)
    for step in steps:
        passed = step.metadata["capacity"].get("passed")
        if step.offered_rps and passed is not None:
            outcomes[float(step.offered_rps)].append(bool(passed))
    return dict(outcomes)


def capacity_estimate(steps: list[Record], confidence: float = 0.95) -> Capacity:
    """The capacity of one search with its interval (bench.report.stats.capacity)."""
    return capacity(capacity_outcomes(steps), confidence)


def searches(records: list[Record]) -> dict[tuple, dict[str, list[Record]]]:
    """Capacity steps per (objective p99 ms, scenario), then per search."""
    found: dict[tuple, dict[str, list[Record]]] = defaultdict(lambda: defaultdict(list))
    for rec in records:
        capacity = rec.metadata.get("capacity")
        if (
            capacity
            and not rec.emulated
            and not of_study(rec)
            and not is_warmup(rec)
            # under foreign load and repeated: the repeat is the step
            and not (rec.foreign_load is True and not rec.metadata.get("repeat_of"))
        ):
            key = (capacity["objective"]["p99_ms"], rec.scenario)
            found[key][capacity["search"]].append(rec)
    return found


def capacity_found(steps: list[Record]) -> float | None:
    """The capacity a search confirmed, or None."""
    results = [s.metadata["capacity"].get("result_rps") for s in steps]
    return next((r for r in results if r is not None), None)


def capacity_sections(records: list[Record], results: Path, plots: dict[str, str]) -> list[str]:
    """Per objective and scenario: each server's capacity, below and past it, and the knee."""
    lines: list[str] = []
    for (p99_ms, scenario), by_search in sorted(searches(records).items()):
        steps = [
            sorted(s, key=lambda r: r.metadata["capacity"]["step"]) for s in by_search.values()
        ]
        rows = sorted((_capacity_row(s) for s in steps), key=lambda row: (row[-1], row[0]))
        lines += [f"### Capacity at p99 ≤ {p99_ms:g} ms: {scenario} (`{steps[0][0].path}`)", ""]
        plot = plots.get(f"knee-{scenario}-{p99_ms:g}")
        if plot:
            lines += [f"![{scenario}: p99 against offered rate]({plot})", ""]
        lines += [*markdown_table(CAPACITY_HEADER, rows, "llrrrrrllrl"), "", CAPACITY_NOTE, ""]
        if any("‡" in cell for row in rows for cell in row):
            lines += [BRACKET_NOTE, ""]
        if any("◇" in cell for row in rows for cell in row):
            lines += [PAST_NOTE, ""]
        if any("⚐" in cell for row in rows for cell in row):
            lines += [IDLE_NOTE, ""]
    return lines


def _knee_capacity(steps: list[Record]) -> tuple[float | None, tuple[float, float] | None]:
    """The crossing the summary reports (capacity_estimate) with its interval, for the plot;
    the confirmed search result where no crossing is known."""
    cap = capacity_estimate(steps)
    if cap.center is None:
        return capacity_found(steps), None
    interval = (cap.low, cap.high) if cap.low is not None and cap.high is not None else None
    return cap.center, interval


def knee_series(records: list[Record]) -> dict[tuple[str, float], list[Knee]]:
    """Per (scenario, objective): per search, every step (offered, p99, met the objective)
    and the capacity it found."""
    steps: dict[tuple[str, float], dict[str, list[Record]]] = defaultdict(lambda: defaultdict(list))
    for rec in records:
        capacity = rec.metadata.get("capacity")
        if capacity and rec.status == "ok" and rec.offered_rps:
            key = (rec.scenario, float(capacity["objective"]["p99_ms"]))
            steps[key][capacity["search"]].append(rec)
    series: dict[tuple[str, float], list[Knee]] = {}
    for key, by_search in steps.items():
        series[key] = [
            Knee(
                label=f"{s[0].server} {knobs_label(s[0].knobs or {})} [{host_of(s[0])}]",
                steps=[
                    (
                        r.offered_rps,
                        (r.latency_ms or {}).get("p99"),
                        r.metadata["capacity"].get("passed"),
                    )
                    for r in s
                ],
                capacity=_knee_capacity(s)[0],
                interval=_knee_capacity(s)[1],
            )
            for s in by_search.values()
        ]
    return series


def write_knee_plots(results: Path, records: list[Record]) -> dict[str, str]:
    """A knee plot per scenario and objective; key -> path relative to results."""
    written = {}
    for (scenario, p99_ms), knees in sorted(knee_series(records).items()):
        name = f"knee-{scenario}-{p99_ms:g}"
        path = results / "plots" / f"{name}.png"
        plot_knee(scenario, p99_ms, knees, path)
        written[name] = str(path.relative_to(results))
    return written


def open_loop_sections(records: list[Record], results: Path) -> list[str]:
    """Everything open-loop in the summary, or nothing when no run was."""
    # Studies render their own open-loop arms (bench.studies.sections).
    # Reloads, recycling, quotas and soaks have their own sections (bench.report.production).
    open_records = [
        r
        for r in records
        if is_open_loop(r) and not r.emulated and not of_study(r) and not is_experiment(r)
    ]
    if not open_records:
        return []
    lines = ["## Open loop: fixed arrival rates (oha)", "", LATENCY_NOTE, ""]
    plots = write_knee_plots(results, open_records)
    lines += capacity_sections(open_records, results, plots)
    by_scenario: dict[str, list[Record]] = defaultdict(list)
    for rec in open_records:
        if "capacity" not in rec.metadata:
            by_scenario[rec.scenario].append(rec)
    for scenario in sorted(by_scenario):
        lines += rate_section(scenario, by_scenario[scenario], results)
    failed = [r for r in open_records if r.status == "failed"]
    if failed:
        lines += ["Open-loop runs that failed:", ""]
        lines += [
            f"- {r.server} {r.scenario} at {num(r.offered_rps)} req/s: {r.reason}" for r in failed
        ]
        lines.append("")
    return lines
