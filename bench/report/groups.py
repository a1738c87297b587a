"""Points: the trials of one configuration at one load, and their statistics.

Input: records. Output: groups of ok records that are trials of one another (same scenario,
configuration, load and machine), their per-trial figures, and rankings with ties
(bench.report.stats). Shared by the summary's tables, its "At a glance" and `make compare`.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable

from scipy.stats import gmean

from bench.core.outcome import Outcome
from bench.core.record import Record, analysed, flavor_of, gil_came_back, python_of, session_of
from bench.load import keeps_busy
from bench.report.cells import host_of
from bench.report.stats import Estimate, Ranked, estimate, rank_intervals

# Below this share of connections with a request in flight (by Little's law), the latency
# figures leave out the connections the server never served: flagged as optimistic.
SERVED_MIN = 0.5
CEILING = "nginx-static"  # the server whose throughput is the ceiling for the others
# Reference lines, never ranked nor "best": the ceiling (nginx serving a file) and the Flask
# development server (the baseline every production server is meant to beat).
BASELINES = (CEILING, "flask-dev")


def is_limited(rec: Record) -> bool:
    """A server in a container under the engine's --cpus or --memory (RUNTIME=docker CPUS=
    MEMORY=): shown in the speed tables, labelled, never ranked with unlimited runs."""
    box = rec.container or {}
    return box.get("cpus") is not None or box.get("memory_bytes") is not None


def runtime_key(rec: Record) -> tuple:
    """Where the server ran: natively (empty) or in its image, with the engine's limits and
    network. Not part of point_key: `make compare` pairs a native set with a docker set
    (what the container costs); within one set the two never merge as trials."""
    box = rec.container
    if not box:
        return ()
    return ("docker", box.get("cpus"), box.get("memory_bytes"), box.get("network"))


def quota_of(rec: Record) -> float | None:
    """The cgroup CPU quota the server ran under (CPU_QUOTA=, in CPUs), or None."""
    quota = (rec.cgroup or {}).get("cpu_quota")
    return float(quota) if quota is not None else None


def quota_label(quota: float) -> str:
    """A quota as every renderer names it: `0.5-CPU quota`."""
    return f"{quota:g}-CPU quota"


def limits_key(rec: Record) -> tuple:
    """What the server ran under: its runtime (runtime_key: native, or a container with the
    engine's CPU and memory limits and network) and a cgroup CPU quota (CPU_QUOTA=, the
    cpu-quota study). Part of a configuration's identity: trials at 1.0 and at 0.5 CPU are
    never pooled, and a limited row is ranked only among rows under the same limits."""
    return (runtime_key(rec), quota_of(rec))


def _disturbed(rec: Record) -> bool:
    """An experiment other than a CPU quota alone (is_experiment's other kinds)."""
    if is_limited(rec) or isinstance(rec.metadata.get("noise"), dict):
        return True  # make noise's runs (bench.report.variance) are a design of their own
    return any(
        getattr(rec, key, None) is not None
        for key in ("lifecycle", "recycles", "series", "network")
    )


def is_experiment(rec: Record) -> bool:
    """A run that disturbs the server on purpose or watches it for long (a reload, recycling,
    a CPU quota, a container under the engine's CPU or memory limits, a soak, a load-balancer
    study's namespace, make noise's repeated starts): reported in its own sections, never
    ranked with steady runs."""
    return rec.cgroup is not None or _disturbed(rec)


def under_quota_only(rec: Record) -> bool:
    """make bench CPU_QUOTA='s steady run: a cgroup quota and no other kind of experiment.
    Its point is raced like any other, the quota in its key (bench.report.standings); it was
    left out, and a CPU_QUOTA= race stopped after its first rounds with "nothing to race"
    (quota-upstream, 2026-11-27)."""
    return quota_of(rec) is not None and not _disturbed(rec)


def config_key(rec: Record) -> tuple:
    """What makes two runs comparable as trials of one configuration (not concurrency)."""
    keepalive = rec.keepalive or {}
    return (
        rec.server,
        rec.app,
        tuple(sorted((rec.knobs or {}).items())),
        rec.proxy,
        keepalive.get("client", True),
        keepalive.get("upstream"),
        rec.load_tool,
        rec.load_workers,
        rec.protocol or "http1",  # records before format 11: HTTP/1.1 in clear text
        rec.streams or 1,
        # PYTHON= (None: the usual python3, every record before format 14); a run whose GIL
        # came back ran with it on: a row of its own, labelled (cells.via_label)
        python_of(rec),
        gil_came_back(rec),
        # APP_FLAVOR=: the raw app and the framework app are two configurations, never
        # trials of one (records before format 17's app_flavor: the framework app)
        flavor_of(rec),
    )


def point_key(rec: Record) -> tuple:
    """A configuration at one load (concurrency, offered rate), whatever the machine: the key
    on which two result sets meet (`make compare`, arches)."""
    study = rec.metadata.get("study")
    arm = rec.metadata.get("study_arm") if study else None
    return (rec.scenario, *config_key(rec), rec.concurrency, rec.offered_rps, study, arm)


def machine_group_key(rec: Record) -> tuple:
    """A point on one machine in one session: the trials of one measurement. Two sessions'
    trials are never pooled (they are shown side by side, compared with `make compare`).
    Runs of two versions of a user's app (APP=) are never trials of one another; across
    result sets they meet on point_key (the app's name is in the scenario), so `make compare`
    pairs them."""
    version = (getattr(rec, "user_app", None) or {}).get("sha256")
    return (
        *point_key(rec),
        rec.arch,
        rec.emulated,
        host_of(rec),
        version,
        limits_key(rec),
        session_of(rec),
    )


def groups(records: Iterable[Record]) -> dict[tuple, list[Record]]:
    """The analysed records (ok, neither a warm-up start nor under foreign load) grouped as
    trials of one point on one machine in one session."""
    out: dict[tuple, list[Record]] = defaultdict(list)
    for rec in records:
        if analysed(rec):
            out[machine_group_key(rec)].append(rec)
    return dict(out)


def socket_errors(rec: Record) -> int:
    """Requests of the run that got no answer (bench.core.outcome)."""
    return Outcome.of_record(rec).socket_errors


def served_share(rec: Record) -> float | None:
    """Share of the connections that had a request in flight on average (Little's law:
    mean latency × throughput = requests in flight). Near 1 when every connection is served;
    low when connections wait unserved, whose requests wrk never times. None for a tool that
    paces its connections (Locust's users wait between requests: few are in flight by design)."""
    if not keeps_busy(rec.load_tool):
        return None
    mean = (rec.latency_ms or {}).get("mean")
    if not mean or mean < 0 or not rec.rps or not rec.concurrency:
        return None  # no latency figure (0: nothing timed), no share to read
    return min(1.0, mean / 1000 * rec.rps / rec.concurrency)


def starved(group: list[Record]) -> bool:
    """A closed-loop configuration that left connections unserved: the median served share
    of its trials below SERVED_MIN. Its p99 times only the requests it accepted, so it is
    not comparable with the p99 of a server that served every connection."""
    shares = [s for r in group if r.offered_rps is None and (s := served_share(r)) is not None]
    return bool(shares) and statistics.median(shares) < SERVED_MIN


def round_figure(values: list[float]) -> float:
    """A race round's figure of one configuration from its slices (bench.harness.slices):
    their geometric mean; one run: itself; a slice without requests: 0 (no figure)."""
    return float(gmean(values)) if min(values) > 0 else 0.0


def per_trial(group: list[Record], value: Callable[[Record], float | None]) -> list[float]:
    """One figure per trial: the slices of one race round (metadata.slice, same trial) are
    one trial, combined by round_figure, so the tables count rounds, not slices."""
    by_trial: dict[object, list[float]] = defaultdict(list)
    for i, rec in enumerate(group):
        v = value(rec)
        if v is not None:
            by_trial[_trial_key(i, rec)].append(float(v))
    return [round_figure(v) for v in by_trial.values()]


def _trial_key(i: int, rec: Record) -> object:
    """What makes a run one trial: a sliced round's number (its slices together), else the
    run itself (its place in the group)."""
    return rec.trial if rec.metadata.get("slice") else ("run", i)


def trial_count(group: list[Record]) -> int:
    """Trials of a point: its runs, a sliced round's slices counted once."""
    return len({_trial_key(i, r) for i, r in enumerate(group)})


def rps_values(group: list[Record]) -> list[float]:
    """Per-trial throughput: successful responses per second where the tool says it
    (open loop), requests per second otherwise."""
    return per_trial(
        group, lambda r: r.achieved_rps if r.achieved_rps is not None else (r.rps or 0.0)
    )


def latency_values(group: list[Record], key: str = "p99") -> list[float]:
    """Per-trial latency percentile `key` (a sliced round's slices: their geometric mean)."""
    return per_trial(group, lambda r: (r.latency_ms or {}).get(key))


def rps_estimate(group: list[Record]) -> Estimate | None:
    return estimate(rps_values(group))


def latency_estimate(group: list[Record], key: str = "p99") -> Estimate | None:
    return estimate(latency_values(group, key))


def rank_groups(
    members: dict[tuple, list[Record]],
    admit: Callable[[list[Record]], bool] = lambda group: True,
) -> tuple[dict[tuple, Ranked], dict[tuple, Ranked]]:
    """Rank intervals among groups measured side by side (one machine, one load), each
    metric one Holm-corrected family: by requests/s (higher first; never at a fixed offered
    rate, where achieved req/s measures the load tool's pacing) and by p99 (lower first),
    among the groups `admit` lets in (the others are ranked apart: no rank). Baselines are
    left out."""
    ranked = {k: g for k, g in members.items() if g[0].server not in BASELINES and admit(g)}
    fixed_rate = any(g[0].offered_rps is not None for g in ranked.values())
    by_rps = [] if fixed_rate else rank_intervals({k: rps_values(g) for k, g in ranked.items()})
    by_p99 = rank_intervals(
        {k: latency_values(g) for k, g in ranked.items() if latency_values(g)},
        higher_is_better=False,
    )
    return {r.key: r for r in by_rps}, {r.key: r for r in by_p99}  # type: ignore[misc]


def arena_key(rec: Record) -> tuple:
    """Groups that compete with each other: same scenario, load tool, load, machine, session
    (a comparison lives inside one session: across sessions, `make compare`) and limits (a
    container under --cpus or a CPU quota is ranked only among its own kind)."""
    return (
        rec.scenario,
        rec.load_tool,
        rec.load_workers,
        rec.concurrency,
        rec.offered_rps,
        rec.metadata.get("study"),
        rec.arch,
        rec.emulated,
        host_of(rec),
        session_of(rec),
        limits_key(rec),
    )


def ranks(
    all_groups: dict[tuple, list[Record]],
    admit: Callable[[list[Record]], bool] = lambda group: True,
) -> tuple[dict[tuple, Ranked], dict[tuple, Ranked]]:
    """Every group's rank among those of its arena (of the groups `admit` lets in), by
    requests/s and by p99."""
    arenas: dict[tuple, dict[tuple, list[Record]]] = defaultdict(dict)
    for key, group in all_groups.items():
        arenas[arena_key(group[0])][key] = group
    by_rps: dict[tuple, Ranked] = {}
    by_p99: dict[tuple, Ranked] = {}
    for members in arenas.values():
        rps, p99 = rank_groups(members, admit)
        by_rps.update(rps)
        by_p99.update(p99)
    return by_rps, by_p99
