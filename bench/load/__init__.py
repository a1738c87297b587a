"""Load generation: one interface, one implementation per tool, found by discovery.

Input: a LoadRequest (where, how many connections or users, how long). Output: a LoadResult
(requests, rate, latency, errors, the tool's raw output to keep beside the record, and which
raw file holds each response's latency), or LoadError (the tool failed, its raw output
attached) / LoadAborted (the watchdog saw the stack break). Every tool runs in its own process
group under the ProcessTable, ends by itself after the duration, and is killed if it overstays.

This package is the only code that knows tool names and tool files. Each module in it is one
tool and exports it as `TOOL`, a class declaring what the rest of the harness asks: open or
closed loop, one URL or a mix of routes (matched against what a scenario needs,
bench.core.scenario), the raw file holding per-request latencies, the make variables it reads.
A new tool is one new module here: the registry below finds it (as TechEmpower's test types
are found by their folders). A record's `load_tool` name maps back to those properties through
`traits(name)`, so records written by any version read the same way.
"""

from __future__ import annotations

import contextlib
import functools
import gzip
import importlib
import math
import os
import pkgutil
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from bench.core import defaults, scenario
from bench.core.parse import ParseError
from bench.core.protocol import HTTP1

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
    # The key of `raw` holding each response's intended send time, latency and status (a
    # gzip CSV, PER_REQUEST_HEADER); None when the tool kept none.
    per_request_name: str | None = None
    # A WebSocket run's own figures (connections opened and held, messages, the generator's
    # send lag and ceiling): the record's `websocket`; None for HTTP tools.
    websocket: dict | None = None

    def empty_reason(self) -> str | None:
        """Why the run measured nothing (None: it measured something): no request completed,
        or, for an idle WebSocket run (no message by design), no connection held."""
        figures = self.websocket or {}
        if figures.get("mode") == "idle":
            return None if figures.get("connections_held") else "no connection held"
        return "no request completed" if self.requests == 0 else None

    @property
    def per_request(self) -> str | bytes | None:
        """The per-request file's content (for the lifecycle and soak analyses), or None."""
        return self.raw.get(self.per_request_name) if self.per_request_name else None


@dataclass(frozen=True)
class LoadRequest:
    """What one load run is asked to do."""

    base_url: str  # http://host:port, no path
    path: str  # the URL path (a single-URL tool) or the mix's name (a mix tool)
    scenario: str
    concurrency: int  # connections (closed-loop URL tools), the pool (open-loop), or users
    duration_s: float
    out: Path  # raw output stem in the run directory (the tool adds its suffixes)
    keepalive: bool = True  # off: every request on a new connection
    timeout_s: int = DEFAULT_TIMEOUT_S
    cpus: frozenset[int] | None = None  # where the tool may run (PIN=1)
    rate: int | None = None  # offered requests/s (open-loop tools); None: closed-loop
    # Count responses by status and time the last one (it may cost the tool: a Lua call per
    # response, ~15 % of its CPU). Off: by_status may stay empty and the tool's window None;
    # non-2xx still count.
    statuses: bool = True
    protocol: str = HTTP1  # PROTOCOL=: how it talks to the server (bench.core.protocol)
    streams: int = 1  # PROTOCOL=h2c/h2: requests in flight per connection (STREAMS=)
    cafile: Path | None = None  # under TLS: the certificate the server must present

    @property
    def url(self) -> str:
        """The full URL of a single-URL tool."""
        return self.base_url + self.path


Watch = Callable[[], "str | None"]


class Traits(Protocol):
    """What a load tool is, declared as class attributes: all a report or a check needs to
    know of a record's `load_tool`, without naming it."""

    name: str  # LOAD= and the record's load_tool
    open_loop: bool  # sends at RATE= arrivals/s, whatever the server does; else closed loop
    # Closed loop with every connection kept busy (no think time, no pacing): Little's law then
    # tells how many connections the server served (bench.report.groups.served_share)
    busy: bool
    drives: str  # scenario.URL (one URL) or scenario.MIX (a mix of routes): what it can play
    # The raw-file suffix of its per-request latencies (PER_REQUEST_HEADER, gzip); None: none kept
    per_request: str | None
    selectable: bool  # LOAD= may name it (False: a pattern only a study drives)
    default: bool  # what LOAD= is when unset (exactly one tool)
    variables: tuple[str, ...]  # the make variables of its own it reads (LOCUST_WORKERS, ...)
    protocols: tuple[str, ...]  # the PROTOCOL= values it speaks (bench.core.protocol)
    # What its figures are not, said beside them wherever they are shown ("": nothing to say)
    caveat: str


class LoadTool(Traits, Protocol):
    """A load generator: every module of this package but the fakes in the tests."""

    primes: bool  # whether a primer and a warmup precede each measurement
    version: str | None  # the tool's version for the record, read by prepare()

    @classmethod
    def configured(cls, load_threads: int, load_workers: int) -> LoadTool:
        """The tool as a run's LOAD_THREADS and LOCUST_WORKERS set it (each takes its own)."""

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


@functools.cache
def kinds() -> dict[str, type[Traits]]:
    """Every tool of this package by name: each module's TOOL. The default first, then by
    name (the order error messages list them)."""
    found: dict[str, type[Traits]] = {}
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        kind: type[Traits] = module.TOOL  # every module here is one tool (module docstring)
        if kind.name in found:
            raise RuntimeError(f"two load tools are named {kind.name!r}")
        found[kind.name] = kind
    defaults_ = [name for name, kind in found.items() if kind.default]
    if len(defaults_) != 1:
        raise RuntimeError(f"exactly one load tool must be the default, not {defaults_}")
    return dict(sorted(found.items(), key=lambda item: (not item[1].default, item[0])))


def traits(name: str) -> type[Traits] | None:
    """What a record's load_tool stands for; None for a tool this checkout does not have."""
    return kinds().get(name)


def names() -> tuple[str, ...]:
    """The tools LOAD= may name, default first."""
    return tuple(name for name, kind in kinds().items() if kind.selectable)


def default_name() -> str:
    """The tool LOAD= means when unset."""
    return next(name for name, kind in kinds().items() if kind.default)


def default_for(scenarios: Iterable[str]) -> str:
    """The tool LOAD= means when unset for these scenarios: the default, or for WebSocket
    scenarios (which no HTTP tool drives) the one tool that drives them all. The pre-check's
    twin is bench.core.variables.default_load."""
    found = kinds()
    wanted = {scenario.SCENARIOS[s].needs for s in scenarios if s in scenario.SCENARIOS}
    if not wanted or wanted == {found[default_name()].drives}:
        return default_name()
    able = [n for n in names() if {found[n].drives} == wanted]
    return able[0] if len(able) == 1 and scenario.WS in wanted else default_name()


def open_loop_name() -> str:
    """The open-loop tool make capacity and make soak use unless LOAD= says otherwise (the
    default when it is open-loop, else the first by name)."""
    return next(name for name in names() if kinds()[name].open_loop)


def tools(load_threads: int = 1, load_workers: int = 0) -> dict[str, LoadTool]:
    """Every tool LOAD= may name, configured by the run's LOAD_THREADS / LOCUST_WORKERS."""
    return {name: tool(name, load_threads, load_workers) for name in names()}


def tool(name: str | None, load_threads: int = 1, load_workers: int = 0) -> LoadTool:
    """One tool (None: the default), configured; KeyError for a name LOAD= may not take."""
    name = name or default_name()
    if name not in names():
        raise KeyError(name)
    kind: type[LoadTool] = kinds()[name]  # type: ignore[assignment]
    return kind.configured(load_threads, load_workers)


def scenarios_for(name: str) -> tuple[str, ...]:
    """The scenarios a tool can drive (those needing what it drives), in declaration order."""
    return scenario.needing(kinds()[name].drives)


def is_default(name: str) -> bool:
    """A record measured by the default tool (its connections need no label in a table)."""
    kind = traits(name)
    return kind is not None and kind.default


def caveat(name: str) -> str:
    """What a record's load tool's figures are not (Traits.caveat; "" for none or an unknown
    tool)."""
    kind = traits(name)
    return kind.caveat if kind is not None else ""


def keeps_busy(name: str) -> bool:
    """A tool whose connections each send their next request as soon as the last returns
    (Traits.busy); False for a paced one (Locust's users, a rate per connection) or unknown."""
    kind = traits(name)
    return kind is not None and kind.busy


def uses_threads(name: str) -> bool:
    """A tool whose CPU is bounded by its LOAD_THREADS threads (saturation is then visible
    as its CPU % over 100 % × threads)."""
    kind = traits(name)
    return kind is not None and "LOAD_THREADS" in kind.variables


# -- per-request files: what a tool with `per_request` keeps beside the record -------------
PER_REQUEST_HEADER = "intended_ms,latency_ms,status"
PERCENTILES = {"p50": 50.0, "p90": 90.0, "p99": 99.0, "p999": 99.9}


def per_request_files(load_tool: str, raw_files: Iterable[str]) -> list[str]:
    """The raw files of a record that hold its per-request latencies (none when its tool
    keeps none or is unknown here)."""
    kind = traits(load_tool)
    if kind is None or kind.per_request is None:
        return []
    return [name for name in raw_files if name.endswith("." + kind.per_request)]


def read_per_request_ms(path: str | Path) -> list[float]:
    """Every response's latency (ms) from a per-request file (gzip or not); ParseError when
    it is not one."""
    path = Path(path)
    try:
        raw = path.read_bytes()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise ParseError(f"cannot read {path}: {exc}") from exc
    return per_request_ms(raw.decode(errors="replace"), path)


def per_request_ms(text: str, where: str | Path) -> list[float]:
    """The latency column of a per-request CSV's text; ParseError when it is not one."""
    lines = text.splitlines()
    if not lines or lines[0] != PER_REQUEST_HEADER:
        raise ParseError(f"{where}: not a per-request file (no {PER_REQUEST_HEADER!r} header)")
    try:
        return [float(line.split(",")[1]) for line in lines[1:] if line]
    except (IndexError, ValueError) as exc:
        raise ParseError(f"{where}: malformed per-request line: {exc}") from exc


def latency_summary_ms(samples_ms: Iterable[float]) -> dict[str, float | None]:
    """p50 p90 p99 p999 max mean of the samples: sorted[floor(p/100 * n)], as oha computes
    its own, so a per-request file reproduces the tool's figures exactly."""
    values = sorted(samples_ms)
    if not values:
        return dict.fromkeys((*PERCENTILES, "max", "mean"))
    n = len(values)
    out: dict[str, float | None] = {
        key: values[min(int(p / 100 * n), n - 1)] for key, p in PERCENTILES.items()
    }
    out["max"] = values[-1]
    out["mean"] = round(math.fsum(values) / n, 6)
    return out


def default_load_threads() -> int:
    """Half the usable CPUs (at least 1): the other half is the server's."""
    return max(1, len(os.sched_getaffinity(0)) // 2)
