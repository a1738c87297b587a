"""One measured point: primer, warmup, drain, the measured window with its samplers and
watchdog, then the database and proxy deltas.

Input: a load tool, a Served (the server as the load sees it: a local process with its
stack, or a remote TARGET= with no local process: the same steps either way) and one
RunSpec. Output: a Measurement (typed: the load result, samples, database and proxy
figures), or LoadAborted (the watchdog saw the server or the stack break) / LoadError (the
load tool failed).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from bench import defaults, lifecycle, plan, soak
from bench.cgroup import CpuCgroup
from bench.load import LoadAborted, LoadRequest, LoadResult, LoadTool
from bench.load.oha import REQUESTS_NAME
from bench.metadata import now_iso
from bench.procs import ProcessTable
from bench.recycle import WorkerWatch
from bench.sample import Resources, Sampler, Sockets


@dataclass(frozen=True)
class DbStats:
    """pgbouncer's view of the measured window: query and transaction deltas, pool peaks."""

    queries: int
    transactions: int
    server_conns_max: int | None = None
    server_conns_active_max: int | None = None
    clients_waiting_max: int | None = None

    def to_dict(self) -> dict[str, int]:
        """The record's db (pool peaks only when sampled)."""
        data = {"queries": self.queries, "transactions": self.transactions}
        if self.server_conns_max is not None:
            data |= {
                "server_conns_max": self.server_conns_max,
                "server_conns_active_max": self.server_conns_active_max or 0,
                "clients_waiting_max": self.clients_waiting_max or 0,
            }
        return data


@dataclass(frozen=True)
class Measurement:
    """What one measured run produced."""

    result: LoadResult
    started: str
    db: DbStats | None = None
    resources: Resources | None = None
    sockets: Sockets | None = None
    proxy_by_status: dict[int, int] | None = None
    cgroup: dict[str, object] | None = None  # CPU_QUOTA=: the quota and its throttling
    lifecycle: dict[str, object] | None = None  # LIFECYCLE=: the event and what the load saw
    series: dict[str, object] | None = None  # make soak: RSS and rate over time
    recycles: dict[str, int] | None = None  # RECYCLE=: the workers started in the window


class Served(Protocol):
    """The server under load, as the measurement sees it (bench.site has the real ones)."""

    base_url: str
    name: str  # for raw file names: the server id, or "target"

    def watch(self) -> str | None:
        """Why the measurement is void (a process died), or None."""

    def wait_idle(self) -> None:
        """Wait until requests left over from the warmup are served."""

    def sampler(self) -> Sampler:
        """A sampler of the server side (CPU, memory, sockets, pools) for the window."""

    def db_stats(self) -> dict[str, int] | None:
        """pgbouncer's SHOW STATS counters now; None when the database is not ours."""

    def proxy_mark(self) -> int:
        """Where the proxy's log ends now (0 without a proxy)."""

    def proxy_statuses(self, mark: int, since: float, until: float) -> dict[int, int] | None:
        """Failed responses by status the proxy logged in [since, until]; None: no proxy."""


@dataclass(frozen=True)
class Settings:
    """What every measured point of one harness arm shares."""

    table: ProcessTable
    run_dir: Path
    duration_s: int
    warmup_s: int
    keepalive: bool
    timeout_s: int
    load_cpus: frozenset[int] | None
    lifecycle: str | None = None  # LIFECYCLE=reload: the server's reload mid-window
    soak_interval_s: float | None = None  # make soak: RSS per process every this many s


def _db_delta(before: dict[str, int], after: dict[str, int], pools: dict[str, int]) -> DbStats:
    return DbStats(
        queries=after.get("total_query_count", 0) - before.get("total_query_count", 0),
        transactions=after.get("total_xact_count", 0) - before.get("total_xact_count", 0),
        server_conns_max=pools.get("sv_open", 0) if pools else None,
        server_conns_active_max=pools.get("sv_active", 0) if pools else None,
        clients_waiting_max=pools.get("cl_waiting", 0) if pools else None,
    )


class QuotaWindow:
    """The server's cgroup counters from the start of the measured window (CPU_QUOTA=)."""

    def __init__(self, group: CpuCgroup) -> None:
        self.group = group
        self.before = group.stat()

    def window(self) -> dict[str, object]:
        """The record's cgroup: the quota and the throttling since the window started."""
        delta = self.group.stat().minus(self.before)
        quota_us, period_us = self.group.limits()
        return {
            "cpu_quota": self.group.quota,
            "cgroup_version": self.group.version,
            "quota_us": quota_us,
            "period_us": period_us,
            "nr_periods": delta.nr_periods,
            "nr_throttled": delta.nr_throttled,
            "throttled_ms": delta.throttled_ms,
        }


def throttling(served: Served) -> QuotaWindow | None:
    """A QuotaWindow when the server runs in a cgroup of the harness's (a LocalServed with
    CPU_QUOTA=), else None."""
    group = getattr(served, "cgroup", None)
    return QuotaWindow(group) if isinstance(group, CpuCgroup) else None


def event_trigger(settings: Settings, served: Served) -> lifecycle.Trigger | None:
    """LIFECYCLE=reload: the server's reload signal at the middle of the window (a Served
    that can reload: bench.site.LocalServed)."""
    reload = getattr(served, "reload", None)
    if settings.lifecycle != "reload" or reload is None:
        return None
    return lifecycle.Trigger(settings.duration_s / 2, reload)


def event_outcome(
    settings: Settings,
    served: Served,
    trigger: lifecycle.Trigger | None,
    result: LoadResult,
    rate: int | None,
) -> dict[str, object] | None:
    """The record's lifecycle: when the signal went, and what the load saw around it."""
    if trigger is None:
        return None
    spec = getattr(getattr(served, "server", None), "spec", None)
    outcome: dict[str, object] = {
        "event": settings.lifecycle,
        "signal": getattr(spec, "reload_signal", None),
        "planned_at_s": trigger.planned_at_s,
        "at_s": trigger.fired_at_s,
    }
    if trigger.error is not None or trigger.fired_at_s is None:
        return outcome | {"error": trigger.error or "the run ended before the planned second"}
    requests = result.raw.get(REQUESTS_NAME)
    if requests is None or rate is None:
        return outcome | {"error": "no per-request file: LIFECYCLE needs an open-loop tool"}
    errors = result.errors.to_dict()
    return outcome | lifecycle.analyse(
        requests, errors, rate, settings.duration_s, trigger.fired_at_s
    )


def rss_sampler(settings: Settings, served: Served) -> soak.RssSampler | None:
    """make soak: an RSS sampler of the server's tree (a local server only)."""
    server = getattr(served, "server", None)
    if settings.soak_interval_s is None or server is None:
        return None
    count = soak.samples_in(settings.duration_s, settings.soak_interval_s)
    return soak.RssSampler(server.proc.pid, settings.soak_interval_s, count)


def soak_series(
    settings: Settings, rss: soak.RssSampler | None, result: LoadResult
) -> dict[str, object] | None:
    """The record's series: RSS per process and in all, its slope, and the rate per minute."""
    if rss is None:
        return None
    requests = result.raw.get(REQUESTS_NAME)
    minutes = soak.per_minute(requests, settings.duration_s) if requests is not None else None
    return {
        "interval_s": settings.soak_interval_s,
        **soak.rss_series(rss.times, rss.rss, rss.pid),
        "minutes": minutes,
    }


def worker_watch(served: Served) -> WorkerWatch | None:
    """RECYCLE=: a watch over the workers of a local server started with recycling flags."""
    server = getattr(served, "server", None)
    if server is None or "max_requests" not in server.knobs:
        return None
    return WorkerWatch(server.proc.pid)


def measure_point(
    settings: Settings, tool: LoadTool, served: Served, run: plan.RunSpec, primed: set[str]
) -> Measurement:
    """Primer (first run of a scenario), warmup, drain, then the measured run."""
    stem = settings.run_dir / f"{served.name}-{run.scenario}-c{run.concurrency}-t{run.trial}"

    def request(concurrency: int, seconds: float, phase: str) -> LoadRequest:
        return LoadRequest(
            base_url=served.base_url,
            path=run.path,
            scenario=run.scenario,
            concurrency=concurrency,
            duration_s=seconds,
            out=stem.with_name(f"{stem.name}.{phase}"),
            keepalive=settings.keepalive,
            timeout_s=settings.timeout_s,
            cpus=settings.load_cpus,
            rate=run.rate,
        )

    if tool.primes and run.scenario not in primed:
        tool.run(settings.table, request(defaults.PRIMER_CONCURRENCY, defaults.PRIMER_S, "primer"))
        primed.add(run.scenario)
    if tool.primes and settings.warmup_s:
        tool.run(settings.table, request(run.concurrency, settings.warmup_s, "warmup"))
    served.wait_idle()
    before = served.db_stats()
    quota = throttling(served)
    mark = served.proxy_mark()
    started = now_iso()
    sampler = served.sampler()
    trigger = event_trigger(settings, served)
    rss = rss_sampler(settings, served)
    workers = worker_watch(served)
    window_start = time.time()
    if trigger is not None:
        trigger.start()
    if rss is not None:
        rss.start()
    if workers is not None:
        workers.start()
    try:
        result = tool.run(
            settings.table,
            request(run.concurrency, settings.duration_s, "measure"),
            watch=served.watch,
            sampler=sampler,
        )
    finally:
        if trigger is not None:
            trigger.stop()
        if rss is not None:
            rss.stop()
        if workers is not None:
            workers.stop()
    # The server may die in the last half second: check once more after the load.
    reason = served.watch()
    if reason is not None:
        raise LoadAborted(reason)
    # Only requests that started and ended while the tool counted, by its own clock when it
    # gives one (wrk: before its first request .. its last counted response): a proxy goes
    # on answering the requests it holds (504s seconds later) after the tool has left, and
    # the tool starts tens of ms after window_start on a busy machine. Otherwise:
    # window_start + the tool's duration.
    window = result.window or (window_start, window_start + result.duration_s)
    proxy = served.proxy_statuses(mark, *window)
    after = served.db_stats()
    db = None
    if before is not None and after is not None:
        db = _db_delta(before, after, sampler.pools())
    return Measurement(
        result=result,
        started=started,
        db=db,
        resources=sampler.resources(),
        sockets=sampler.sockets() if sampler.port is not None else None,
        proxy_by_status=proxy,
        cgroup=quota.window() if quota is not None else None,
        lifecycle=event_outcome(settings, served, trigger, result, run.rate),
        series=soak_series(settings, rss, result),
        recycles=workers.outcome(served.server.knobs) if workers is not None else None,  # type: ignore[attr-defined]
    )
