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
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from bench.core import defaults, plan
from bench.core.protocol import HTTP1
from bench.core.scenario import SCENARIOS
from bench.harness.observers import Observers
from bench.harness.served import Served
from bench.host.metadata import now_iso
from bench.host.procs import ProcessTable
from bench.load import LoadAborted, LoadRequest, LoadResult, LoadTool
from bench.observe.foreign import ForeignLoad
from bench.observe.sample import Resources, Sampler, Sockets

if TYPE_CHECKING:
    pass


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
    container: dict[str, object] | None = None  # RUNTIME=docker: the container's cgroup window
    lifecycle: dict[str, object] | None = None  # LIFECYCLE=: the event and what the load saw
    series: dict[str, object] | None = None  # make soak: RSS and rate over time
    recycles: dict[str, int] | None = None  # RECYCLE=: the workers started in the window
    foreign: ForeignLoad | None = None  # the CPU others used beside the window
    # /interpreter read inside the server right after the window (GIL state then; None: unread)
    interpreter: dict | None = None


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
    protocol: str = HTTP1  # PROTOCOL=: how the load tool talks to the server
    streams: int = 1  # STREAMS=: HTTP/2 requests in flight per connection


def _db_delta(before: dict[str, int], after: dict[str, int], pools: dict[str, int]) -> DbStats:
    return DbStats(
        queries=after.get("total_query_count", 0) - before.get("total_query_count", 0),
        transactions=after.get("total_xact_count", 0) - before.get("total_xact_count", 0),
        server_conns_max=pools.get("sv_open", 0) if pools else None,
        server_conns_active_max=pools.get("sv_active", 0) if pools else None,
        clients_waiting_max=pools.get("cl_waiting", 0) if pools else None,
    )


Requester = Callable[..., LoadRequest]


def _requester(settings: Settings, served: Served, run: plan.RunSpec) -> Requester:
    """The LoadRequest of each phase of this point (primer, warmup, measure): raw files
    named after the server, scenario, concurrency and trial."""
    sliced = f"-s{run.slice}" if run.slice else ""
    stem = (
        settings.run_dir / f"{served.name}-{run.scenario}-c{run.concurrency}-t{run.trial}{sliced}"
    )

    def request(concurrency: int, seconds: float, phase: str, statuses: bool = True) -> LoadRequest:
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
            statuses=statuses,
            protocol=settings.protocol,
            streams=settings.streams,
            cafile=served.server.client.cafile if served.server is not None else None,
        )

    return request


def _warm(
    settings: Settings, tool: LoadTool, run: plan.RunSpec, primed: set[str], request: Requester
) -> LoadResult | None:
    """The primer (first run of a scenario on this server) and the warmup, for a tool that
    primes and a scenario that warms; the warmup's result, None without one."""
    if tool.primes and run.scenario not in primed:
        tool.run(settings.table, request(defaults.PRIMER_CONCURRENCY, defaults.PRIMER_S, "primer"))
        primed.add(run.scenario)
    declared = SCENARIOS.get(run.scenario)
    if tool.primes and settings.warmup_s and (declared is None or declared.warms):
        return tool.run(settings.table, request(run.concurrency, settings.warmup_s, "warmup"))
    return None


@dataclass(frozen=True)
class _Window:
    """The measured window as the load tool and the samplers saw it."""

    result: LoadResult
    started: str
    sampler: Sampler
    # (start, end) in Unix seconds: the tool's own clock when it gives one (wrk: before its
    # first request .. its last counted response), else when the harness started it + the
    # tool's duration. A proxy goes on answering the requests it holds (504s seconds later)
    # after the tool has left, and the tool starts tens of ms after the harness's start on a
    # busy machine: only requests inside this span are the run's.
    span: tuple[float, float]


def _measure_window(
    settings: Settings,
    tool: LoadTool,
    served: Served,
    observers: Observers,
    request: LoadRequest,
) -> _Window:
    """The measured run with the server's sampler, the watchdog and the observers around it;
    LoadAborted when the server or the stack broke."""
    started = now_iso()
    sampler = served.sampler()
    window_start = time.time()
    observers.start()
    try:
        result = tool.run(settings.table, request, watch=served.watch, sampler=sampler)
    finally:
        observers.stop()
    # The server may die in the last half second: check once more after the load.
    reason = served.watch()
    if reason is not None:
        raise LoadAborted(reason)
    span = result.window or (window_start, window_start + result.duration_s)
    return _Window(result, started, sampler, span)


def measure_point(
    settings: Settings, tool: LoadTool, served: Served, run: plan.RunSpec, primed: set[str]
) -> Measurement:
    """Primer (first run of a scenario), warmup, drain, then the measured run."""
    request = _requester(settings, served, run)
    warm = _warm(settings, tool, run, primed, request)
    # Responses by status cost the load tool per response (bench/load/wrk_report.lua): counted
    # when a proxy is in front (its log is read inside the tool's window), when the warmup at
    # this point saw failed statuses, or without a warmup to tell; else the tool's own non-2xx
    # count stands alone.
    statuses = served.proxied or warm is None or warm.errors.non_2xx > 0
    served.wait_idle()
    before = served.db_stats()
    observers = Observers.of(
        served, settings.duration_s, settings.lifecycle, settings.soak_interval_s
    )
    mark = served.proxy_mark()
    measured = request(run.concurrency, settings.duration_s, "measure", statuses)
    window = _measure_window(settings, tool, served, observers, measured)
    proxy = served.proxy_statuses(mark, *window.span)
    after = served.db_stats()
    interpreter = served.interpreter()  # after the window: did an import turn the GIL on?
    sampler = window.sampler
    db = None
    if before is not None and after is not None:
        db = _db_delta(before, after, sampler.pools())
    return Measurement(
        result=window.result,
        started=window.started,
        db=db,
        resources=sampler.resources(),
        sockets=sampler.sockets() if sampler.port is not None else None,
        proxy_by_status=proxy,
        interpreter=interpreter,
        **observers.outcome(window.result, run.rate),  # type: ignore[arg-type]
    )
