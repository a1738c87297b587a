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
from typing import TYPE_CHECKING, Protocol

from bench.core import defaults, plan
from bench.harness.observers import Observers
from bench.host.metadata import now_iso
from bench.host.procs import ProcessTable
from bench.load import LoadAborted, LoadRequest, LoadResult, LoadTool
from bench.observe.sample import Resources, Sampler, Sockets

if TYPE_CHECKING:
    from bench.host.cgroup import CpuCgroup
    from bench.stack.components import RunningServer


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
    """The server under load, as the measurement sees it (bench.stack.site has the real ones)."""

    base_url: str
    name: str  # for raw file names: the server id, or "target"
    proxied: bool  # a proxy of ours in front: its log is read inside the tool's window
    # The facts a record keeps about this start (None where the site has none):
    argv: list[str] | None  # the server's command line
    verification: dict | None  # what verify_server checked, and its warnings
    backlog: int | None  # the listen socket's backlog as the kernel reports it
    # What the production observers follow (bench.harness.observers); None: not ours (TARGET=)
    server: RunningServer | None  # the server process we started: to signal and to sample
    cgroup: CpuCgroup | None  # CPU_QUOTA=: the server's own cgroup

    def reload(self) -> None:
        """LIFECYCLE=reload: the server's own reload signal (only where `server` is ours)."""

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


def measure_point(
    settings: Settings, tool: LoadTool, served: Served, run: plan.RunSpec, primed: set[str]
) -> Measurement:
    """Primer (first run of a scenario), warmup, drain, then the measured run."""
    stem = settings.run_dir / f"{served.name}-{run.scenario}-c{run.concurrency}-t{run.trial}"

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
        )

    if tool.primes and run.scenario not in primed:
        tool.run(settings.table, request(defaults.PRIMER_CONCURRENCY, defaults.PRIMER_S, "primer"))
        primed.add(run.scenario)
    warm = None
    if tool.primes and settings.warmup_s:
        warm = tool.run(settings.table, request(run.concurrency, settings.warmup_s, "warmup"))
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
    started = now_iso()
    sampler = served.sampler()
    window_start = time.time()
    observers.start()
    try:
        result = tool.run(
            settings.table,
            request(run.concurrency, settings.duration_s, "measure", statuses),
            watch=served.watch,
            sampler=sampler,
        )
    finally:
        observers.stop()
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
        **observers.outcome(result, run.rate),  # type: ignore[arg-type]
    )
