"""What a study measures: its metrics read from records, per arm and cell.

Input: records (a study's, of one run). Output: METRICS (metric -> its column name), one
record's value of a metric, the geometric mean over trials per (arm, scenario, concurrency,
offered rate) cell (the median of those per arm), the offered rates of derived arms, and
figures formatted for a table.
"""

from __future__ import annotations

import statistics
from collections import defaultdict

from bench.core import studyfile
from bench.core.outcome import Outcome
from bench.core.record import Record, is_warmup, latest_per_arm, never_recycled, thrashed
from bench.report.stats import central
from bench.report.websocket import rss_growth

# held_in_limit's declared memory limit: the server's RSS may grow to this (MB; 1 GiB, a
# common container limit): how many idle connections fit is (limit - RSS before connecting)
# / MB per connection, from the run's own slope (a straight line: what it assumes).
WS_MEMORY_LIMIT_MB = 1024

METRICS = {
    "rps": "req/s",
    "mean_s": "mean response s",
    "mean_ms": "mean ms",
    "p50_ms": "p50 ms",
    "p90_ms": "p90 ms",
    "p99_ms": "p99 ms",
    "p999_ms": "p99.9 ms",
    "errors_pct": "errors %",
    "gateway_errors_pct": "502+504 %",
    "s502": "502s",
    "s504": "504s",
    "overflows": "listen overflows",
    "time_wait": "TIME_WAIT",
    "time_wait_db": "TIME_WAIT at pgbouncer",
    "server_cpu_pct": "server CPU %",
    # the server's RSS summed over its process tree, sampled over the measured window
    # (resources.server_rss_mb; under qemu it is the emulator's: None)
    "server_rss_mb": "server RSS MB",
    # open loop (records with offered_rps)
    "offered_rps": "offered req/s",
    "achieved_rps": "achieved req/s",
    "failed_pct": "failed %",
    # CPU_QUOTA= / cpu_quota (records with a cgroup), or a container's CPU limit (cpus): its
    # cpu.stat over the measured window
    "throttled_ms": "throttled ms",
    "throttled_pct": "throttled periods %",
    # runtime = "docker" (records with a container): memory.events / memory.oom_control's
    # oom_kill, the memory peak, and (v1) memory.failcnt: times usage hit the limit (the
    # kernel reclaimed instead of killing) over the window
    "oom_kills": "OOM kills",
    "memory_peak_mb": "memory peak MB",
    "memory_failcnt": "hits of the memory limit",
    "memory_anon_mb_end": "anon MB at end",
    # LIFECYCLE=reload (records with a lifecycle): what the load saw around the reload
    "reload_failed": "failed on reload",
    "p99_around_ms": "p99 ms ±2 s of reload",
    "recovery_s": "recovery s",
    # answered 2xx but later than the record's latency_limit_ms (LATE_LIMIT_MS, the p99
    # objective): lifecycle.late_arrivals (LIFECYCLE=reload) or recycles.late_arrivals
    # (RECYCLE=); a server that queues through a reload fails nothing and is late instead
    "late": "late (past the p99 objective)",
    # RECYCLE= (records with recycles)
    "workers_started": "workers started",
    # WebSocket runs (records with `websocket`); SCENARIO=websocket-idle: what a connection
    # held open with no message costs the server (its RSS over the window against the RSS
    # before the load connected)
    "connections_held": "connections held",
    "rss_per_1000_mb": "MB per 1,000 connections",
    "held_in_limit": f"connections in {WS_MEMORY_LIMIT_MB:,} MB",
}


# Counted on failed runs too (a server the kernel's OOM kills brought down is the finding).
ON_FAILED_RUNS = studyfile.ON_FAILED_RUNS


# Figures of the requests served: none from a thrashing window (bench.core.record.thrashed)
SERVED_FIGURES = ("rps", "achieved_rps", "mean_s", "mean_ms", "p50_ms", "p90_ms", "p99_ms")
SERVED_FIGURES += ("p999_ms",)


def counted(rec: Record, metric: str) -> bool:
    """Whether a record's value of the metric counts: ok runs, and failed ones for the
    metrics of ON_FAILED_RUNS; never a warm-up start's nor a run under foreign load that
    its repeat replaced; never the rate or latency of a thrashing window (a handful of
    requests under a memory limit: granian's 4.19 req/s and p99 4,400 ms at --memory=121m
    were tabled and drawn as figures beside the per-server table's "too few requests")."""
    if is_warmup(rec) or (rec.foreign_load is True and not rec.metadata.get("repeat_of")):
        return False
    if never_recycled(rec) and metric != "workers_started":
        return False  # no worker was replaced: not a figure of recycling
    if metric in SERVED_FIGURES and thrashed(rec):
        return False
    return rec.status == "ok" or (rec.status == "failed" and metric in ON_FAILED_RUNS)


def metric_value(rec: Record, metric: str) -> float | None:
    """One record's value of a study metric (None: not measured or no sample)."""
    latency = rec.latency_ms or {}
    proxy = (rec.errors or {}).get("proxy_by_status") or {}
    sockets = rec.sockets or {}
    outcome = Outcome.of_record(rec)
    attempts = outcome.arrivals
    if metric == "rps":
        return rec.rps
    if metric == "offered_rps":
        return rec.offered_rps
    if metric == "achieved_rps":
        return rec.achieved_rps
    if metric in ("mean_s", "mean_ms"):
        mean = latency.get("mean")
        return None if mean is None else mean / (1000 if metric == "mean_s" else 1)
    if metric in ("p50_ms", "p90_ms", "p99_ms", "p999_ms"):
        return latency.get(metric.removesuffix("_ms"))
    if metric == "errors_pct":
        return 100 * outcome.failed / attempts if attempts else None
    if metric == "failed_pct":
        return outcome.unserved_pct
    if metric == "gateway_errors_pct":
        bad = int(proxy.get("502", 0)) + int(proxy.get("504", 0))
        return 100 * bad / attempts if attempts else None
    if metric in ("s502", "s504"):
        return float(proxy.get(metric[1:], 0))
    if metric == "overflows":
        return sockets.get("listen_overflows")
    if metric == "time_wait":
        return sockets.get("time_wait_max")
    if metric == "time_wait_db":
        return sockets.get("time_wait_db_max")
    if metric in ("server_cpu_pct", "server_rss_mb"):
        return (rec.resources or {}).get(metric)
    if metric in ("throttled_ms", "throttled_pct"):
        return _throttled(rec, metric)
    if metric == "oom_kills" and rec.status == "failed":
        # A run that failed (the server exited, or failed verification): the kills its
        # container counted until it ended.
        value = (rec.container or {}).get("oom_kills_total")
        return float(value) if isinstance(value, (int, float)) else None
    if metric in ("oom_kills", "memory_peak_mb", "memory_failcnt", "memory_anon_mb_end"):
        value = (rec.container or {}).get(metric)
        return float(value) if isinstance(value, (int, float)) else None
    if metric in ("connections_held", "rss_per_1000_mb", "held_in_limit"):
        return _held_memory(rec, metric)
    if metric == "workers_started":
        value = (rec.recycles or {}).get("workers_started")
        return float(value) if value is not None else None
    if metric == "late":
        return _late(rec)
    if metric in ("reload_failed", "p99_around_ms", "recovery_s"):
        value = (rec.lifecycle or {}).get(metric.removeprefix("reload_"))
        return float(value) if isinstance(value, (int, float)) else None
    raise KeyError(metric)


# Metrics that count events (a zero is common and has no log): judged by an exact test on
# the events and what they are out of (bench.report.decision.count_p) instead of ratios.
# Binomial: events out of the arrivals; Poisson (oom_kills): events per trial.
COUNT_METRICS = ("errors_pct", "failed_pct", "gateway_errors_pct", "s502", "s504")
COUNT_METRICS += ("reload_failed", "oom_kills", "late")


def count_of(rec: Record, metric: str) -> tuple[int, float] | None:
    """A count metric's (events, exposure) in one record: failed, unserved, 502+504, 502 or
    504 out of the arrivals; requests failed around a reload out of the arrivals; OOM kills
    in one trial. None: not measured (or nothing arrived)."""
    outcome = Outcome.of_record(rec)
    if metric == "oom_kills":
        value = metric_value(rec, metric)
        return None if value is None else (int(value), 1.0)
    arrivals = outcome.arrivals
    if not arrivals:
        return None
    proxy = (rec.errors or {}).get("proxy_by_status") or {}
    events = {
        "errors_pct": outcome.failed,
        "failed_pct": outcome.unserved,
        "gateway_errors_pct": int(proxy.get("502", 0)) + int(proxy.get("504", 0)),
        "s502": int(proxy.get("502", 0)),
        "s504": int(proxy.get("504", 0)),
    }
    if metric in ("reload_failed", "late"):
        value = metric_value(rec, metric)
        return None if value is None else (int(value), float(arrivals))
    return events[metric], float(arrivals)


def _late(rec: Record) -> float | None:
    """Arrivals answered late in a reload's or a recycling run's window (None: neither, or a
    record from before format 16 kept them)."""
    found = rec.lifecycle or rec.recycles or {}
    value = found.get("late_arrivals")
    return float(value) if isinstance(value, (int, float)) else None


def _held_memory(rec: Record, metric: str) -> float | None:
    """A WebSocket run's connections held at the window's end; the server's RSS growth
    (peak over the window minus the RSS before the load connected) per 1,000 of them; or
    how many would fit in WS_MEMORY_LIMIT_MB at that slope. None: not a WebSocket run, no
    connection held, no RSS before (records before it was kept), or no growth seen."""
    held = (rec.websocket or {}).get("connections_held")
    if not isinstance(held, int | float):
        return None
    if metric == "connections_held":
        return float(held)
    growth = rss_growth(rec)
    if growth is None:
        return None
    start, per_connection = growth
    if metric == "rss_per_1000_mb":
        return per_connection * 1000
    return max(0.0, (WS_MEMORY_LIMIT_MB - start) / per_connection)


def _throttled(rec: Record, metric: str) -> float | None:
    """Time throttled, or the share of periods throttled, of a record under a CPU quota (a
    native cgroup's, or a container's CPU limit)."""
    quota = rec.cgroup or {}
    if "nr_periods" not in quota:
        quota = rec.container or {}
        if quota.get("quota_us") is None or quota.get("nr_periods") is None:
            return None
    if metric == "throttled_ms":
        return float(quota["throttled_ms"])
    return 100 * quota["nr_throttled"] / quota["nr_periods"] if quota["nr_periods"] else 0.0


# (arm, scenario, concurrency, offered req/s): offered is None for closed-loop runs.
Cell = tuple[str, str, int, float | None]


def latest_run(
    records: list[Record], name: str, declared: tuple[str, ...] | None = None
) -> list[Record]:
    """The records a study's section shows: per arm those of its latest run
    (bench.core.record.latest_per_arm; `declared`: the study file's arm ids)."""
    return latest_per_arm(records, name, declared)


def runs_text(records: list[Record]) -> str:
    """Which runs a section rests on: `run X`, or, when arms were re-run on their own
    (ARMS=), `runs X (15 arms), Y (2 arms: a-fix, b-fix), each arm's latest`."""
    arms: dict[str, list[str]] = defaultdict(list)
    for rec in records:
        arm = str(rec.metadata.get("study_arm"))
        run = str(rec.metadata.get("study_run", ""))
        if arm not in arms[run]:
            arms[run].append(arm)
    runs = sorted(arms)
    if len(runs) == 1:
        return f"run {runs[0]}"

    def count(run: str) -> str:
        return f"{len(arms[run])} arm{'s' if len(arms[run]) != 1 else ''}"

    parts = [f"{runs[0]} ({count(runs[0])})"]
    parts += [f"{run} ({count(run)}: {', '.join(arms[run])})" for run in runs[1:]]
    return f"runs {', '.join(parts)}, each arm's latest"


def measured(records: list[Record], metric: str) -> dict[Cell, float | None]:
    """A metric over trials per (arm, scenario, concurrency, offered rate), ok runs only: the
    geometric mean (bench.report.stats.central: the arithmetic mean where a trial is 0), the
    statistic of every other table of the summary for the same arm."""
    cells: dict[Cell, list[float]] = defaultdict(list)
    seen: set[Cell] = set()
    for rec in records:
        cell = (str(rec.metadata.get("study_arm")), rec.scenario, rec.concurrency, rec.offered_rps)
        seen.add(cell)
        if not counted(rec, metric):
            continue
        value = metric_value(rec, metric)
        if value is not None:
            cells[cell].append(value)
    return {c: central(cells[c]) if cells[c] else None for c in seen}


def fraction_rates(records: list[Record]) -> dict[tuple[str, str], float]:
    """(arm, fraction as written) -> the offered req/s it was run at (metadata.study_rates)."""
    rates = {}
    for rec in records:
        for fraction, rate in (rec.metadata.get("study_rates") or {}).items():
            rates[(str(rec.metadata.get("study_arm")), str(fraction))] = float(rate)
    return rates


def per_arm(records: list[Record], metric: str) -> dict[str, float | None]:
    """Median over an arm's cells of a metric (None: the arm has no measured cell)."""
    by_arm: dict[str, list[float]] = defaultdict(list)
    seen = set()
    for (arm, _, _, _), value in measured(records, metric).items():
        seen.add(arm)
        if value is not None:
            by_arm[arm].append(value)
    return {a: statistics.median(by_arm[a]) if by_arm[a] else None for a in seen}
