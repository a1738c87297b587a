"""Load generation: one interface, one implementation per tool, chosen once by name.

Input: a LoadRequest (where, how many connections or users, how long). Output: a LoadResult
(requests, rate, latency, errors, the tool's raw output to keep beside the record), or
LoadError (the tool failed, its raw output attached) / LoadAborted (the watchdog saw the
stack break). Every tool runs in its own process group under the ProcessTable, ends by
itself after the duration, and is killed if it overstays. Nothing outside bench/load/
branches on which tool runs: what differs (primer and warmup or not, threads or workers,
which scenarios, raw file names) is asked of the tool.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from bench.core import defaults

if TYPE_CHECKING:
    from bench.host.procs import Proc, ProcessTable
    from bench.observe.sample import Sampler

OVERSTAY_S = 30
WATCH_INTERVAL_S = 0.5
DEFAULT_TIMEOUT_S = defaults.LOAD_TIMEOUT_S


class LoadError(RuntimeError):
    """The load tool failed to run or its output is unreadable (not: the server answered
    with errors). `raw` holds whatever output there was, kept beside the failed record."""

    def __init__(self, message: str, raw: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.raw = raw or {}


class LoadAborted(RuntimeError):
    """The watchdog saw the stack break during load; the tool was stopped early."""


@dataclass(frozen=True)
class Latency:
    """Latency percentiles in ms; None means no sample (never "0 ms")."""

    p50: float | None = None
    p90: float | None = None
    p99: float | None = None
    p999: float | None = None
    max: float | None = None
    mean: float | None = None

    def to_dict(self) -> dict[str, float | None]:
        """The record's latency_ms."""
        return {
            "p50": self.p50,
            "p90": self.p90,
            "p99": self.p99,
            "p999": self.p999,
            "max": self.max,
            "mean": self.mean,
        }


@dataclass(frozen=True)
class Errors:
    """Failed requests by class, and every response by HTTP status."""

    connect: int = 0
    read: int = 0
    write: int = 0
    timeout: int = 0
    non_2xx: int = 0
    by_status: dict[int, int] = field(default_factory=dict)
    # What only some tools tell (oha): None where the tool does not say.
    other: int | None = None  # an error the tool reports in a class of none of the above
    aborted: int | None = None  # in flight at the tool's deadline, cut off by the tool
    unsent: int | None = None  # scheduled arrivals never sent (every connection busy)
    by_message: dict[str, int] | None = None  # the tool's own error texts

    def to_dict(self) -> dict[str, object]:
        """The record's errors (proxy_by_status is added by the recorder)."""
        data: dict[str, object] = {
            "connect": self.connect,
            "read": self.read,
            "write": self.write,
            "timeout": self.timeout,
            "non_2xx": self.non_2xx,
            "by_status": {str(k): v for k, v in sorted(self.by_status.items())},
        }
        extra = {
            "other": self.other,
            "aborted": self.aborted,
            "unsent": self.unsent,
            "by_message": self.by_message,
        }
        return data | {k: v for k, v in extra.items() if v is not None}


@dataclass(frozen=True)
class LoadResult:
    """One measured load run, in the record's units, with the raw output it came from."""

    requests: int
    duration_s: float
    rps: float
    latency: Latency
    errors: Errors
    raw: dict[str, str | bytes]  # raw-file suffix -> content, kept beside the record
    bytes: int | None = None
    tasks: dict | None = None  # per task of a mix (Locust), else None
    # (start, end) in Unix seconds by the tool's own clock: from before its first request to
    # its last counted response; None when the tool does not say (then the harness's clock).
    window: tuple[float, float] | None = None
    # Open-loop tools: successful (2xx) responses per second; None for closed-loop tools.
    achieved_rps: float | None = None


@dataclass(frozen=True)
class LoadRequest:
    """What one load run is asked to do."""

    base_url: str  # http://host:port, no path
    path: str  # the URL path (wrk, oha) or the mix's name (Locust)
    scenario: str
    concurrency: int  # connections (wrk) or users (Locust)
    duration_s: float
    out: Path  # raw output stem in the run directory (the tool adds its suffixes)
    keepalive: bool = True  # off: every request on a new connection
    timeout_s: int = DEFAULT_TIMEOUT_S
    cpus: frozenset[int] | None = None  # where the tool may run (PIN=1)
    rate: int | None = None  # offered requests/s (open-loop tools); None: closed-loop
    # Count responses by status and time the last one (wrk: a Lua call per response, ~15 % of
    # its CPU). Off: by_status stays empty and the tool's window is None; non-2xx still count.
    statuses: bool = True

    @property
    def url(self) -> str:
        """The full URL of a single-URL tool."""
        return self.base_url + self.path


Watch = Callable[[], "str | None"]


class LoadTool(Protocol):
    """A load generator. Implementations: bench.load.wrk.Wrk, bench.load.locust.Locust; a fake
    in the tests."""

    name: str
    primes: bool  # whether a primer and a warmup precede each measurement
    open_loop: bool  # sends at RATE= arrivals/s, whatever the server does
    variables: tuple[str, ...]  # the make variables of its own it reads (LOCUST_WORKERS, ...)
    version: str | None  # the tool's version for the record, read by prepare()

    def prepare(self, log: Path) -> None:
        """Make the tool ready to run (a venv, a build); LoadError if it cannot be."""

    def settings(self, concurrency: int) -> dict[str, int | None]:
        """The record's load_threads and load_workers for a run at this concurrency."""

    def run(
        self,
        table: ProcessTable,
        request: LoadRequest,
        watch: Watch | None = None,
        sampler: Sampler | None = None,
    ) -> LoadResult:
        """Run once, bounded in time; LoadAborted when `watch` returns a reason, LoadError
        when the tool fails or its output is unreadable."""


def wait_watching(proc: Proc, limit_s: float, watch: Watch | None) -> None:
    """Wait for the load tool to end by itself, polling `watch` every 0.5 s: LoadAborted with
    its reason when the stack breaks, LoadError past limit_s (the caller stops the process)."""
    deadline = time.monotonic() + limit_s
    while proc.exit_code() is None:
        if time.monotonic() > deadline:
            raise LoadError(f"{proc.name} did not finish within {limit_s:.0f} s")
        reason = watch() if watch is not None else None
        if reason is not None:
            raise LoadAborted(reason)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.popen.wait(timeout=WATCH_INTERVAL_S)


def run_bounded(
    table: ProcessTable,
    name: str,
    argv: list[str],
    log_path: Path,
    limit_s: float,
    request: LoadRequest,
    watch: Watch | None = None,
    sampler: Sampler | None = None,
    stdout_path: Path | None = None,
) -> Proc:
    """Start a single-process load tool in its own group, sample it while it runs, wait for
    it to end by itself (LoadAborted when `watch` gives a reason, LoadError past limit_s),
    and always stop it; the finished process (its exit code) is returned."""
    proc = table.start(
        name,
        argv,
        log_path,
        env={"PATH": os.environ.get("PATH", "")},
        cpus=request.cpus,
        stdout_path=stdout_path,
    )
    if sampler is not None:
        sampler.load_pid = proc.pid
        sampler.start()
    try:
        wait_watching(proc, limit_s, watch)
    finally:
        if sampler is not None:
            sampler.stop()
        table.stop(proc, grace_s=2)
    return proc


def tools(load_threads: int = 1, load_workers: int = 0) -> dict[str, LoadTool]:
    """Every load tool by name, configured by the run's LOAD_THREADS / LOCUST_WORKERS."""
    from bench.load.locust import Locust
    from bench.load.oha import Oha
    from bench.load.wrk import Wrk

    return {"wrk": Wrk(load_threads), "locust": Locust(load_workers), "oha": Oha()}


TOOL_NAMES = ("wrk", "locust", "oha")


def default_load_threads() -> int:
    """Half the usable CPUs (at least 1): the other half is the server's."""
    return max(1, len(os.sched_getaffinity(0)) // 2)
