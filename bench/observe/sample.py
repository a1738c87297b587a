"""System samples during a measured run: CPU and memory of the server's process tree and of
the load tool, TIME_WAIT sockets, the accept queue, and the kernel's listen-overflow counters.

Input: the server's PID and port, the load tool's PID. Output: `resources` and `sockets`
dicts for the record. Parsers take /proc text so they are tested over captured fixtures.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import psutil

from bench.host import sockdiag

TCP_LISTEN = "0A"
INTERVAL_S = 0.5


def parse_listen_queue(text: str, port: int) -> int | None:
    """Connections waiting in the accept queue of the LISTEN socket on port (None: no such)."""
    found = None
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 5 or fields[3] != TCP_LISTEN:
            continue
        local_port = int(fields[1].rsplit(":", 1)[1], 16)
        if local_port == port:
            # For a listening socket rx_queue is the current accept-queue length.
            rx_queue = int(fields[4].split(":")[1], 16)
            found = (found or 0) + rx_queue
    return found


def listen_queue(port: int) -> int | None:
    """Accept-queue depth of the listener on port, over IPv4 and IPv6 (None: not listening)."""
    total = None
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            depth = parse_listen_queue(Path(name).read_text(), port)
        except OSError:
            continue
        if depth is not None:
            total = (total or 0) + depth
    return total


# How long a socket stays in TIME_WAIT on Linux (TCP_TIMEWAIT_LEN): not tunable.
TIME_WAIT_S = 60
# The share of one core the sampler may spend listing TIME_WAIT sockets (Sampler._tick).
TIME_WAIT_BUDGET = 0.01
_TIMER = re.compile(r"timer:\(timewait,([^,)]+)")
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|sec|min)")


def _timer_s(text: str) -> float | None:
    match = _TIMER.search(text)
    if match is None:
        return None
    units = {"ms": 0.001, "sec": 1.0, "min": 60.0}
    return sum(float(n) * units[u] for n, u in _DURATION.findall(match.group(1)))


def _port(address: str) -> int:
    return int(address.rsplit(":", 1)[1])


@dataclass(frozen=True)
class TimeWait:
    """TIME_WAIT sockets by side, from one `ss` listing."""

    total: int
    by_port: dict[int, int]
    # Those that entered TIME_WAIT recently (see parse_ss_time_wait), in all and per port.
    recent: int
    recent_by_port: dict[int, int]


def parse_ss_time_wait(text: str, ports: Collection[int], recent_s: float | None) -> TimeWait:
    """Count `ss -Htn -o state time-wait` lines touching `ports` (local or peer side): in all,
    per port, and those that entered TIME_WAIT within the last `recent_s` seconds (their
    timer shows more than 60 - recent_s s left; ss rounds to whole seconds, so 1 s of slack)."""
    wanted = set(ports)
    total = recent = 0
    by_port = dict.fromkeys(sorted(wanted), 0)
    recent_by_port = dict.fromkeys(sorted(wanted), 0)
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 4:
            continue
        try:
            local, peer = _port(fields[2]), _port(fields[3])
        except (ValueError, IndexError):
            continue
        touched = {local, peer} & wanted
        if not touched:
            continue
        total += 1
        for port in touched:
            by_port[port] += 1
        if recent_s is not None:
            left = _timer_s(line)
            if left is not None and left >= TIME_WAIT_S - recent_s - 1:
                recent += 1
                for port in touched:
                    recent_by_port[port] += 1
    return TimeWait(total, by_port, recent, recent_by_port)


def count_time_wait(
    sockets: list[sockdiag.DiagSocket], ports: Collection[int], recent_s: float | None
) -> TimeWait:
    """parse_ss_time_wait's counts from sock_diag's TIME_WAIT sockets (the timer in ms; the
    same 1 s of slack, so both ways count the same sockets)."""
    wanted = set(ports)
    total = recent = 0
    by_port = dict.fromkeys(sorted(wanted), 0)
    recent_by_port = dict.fromkeys(sorted(wanted), 0)
    for sock in sockets:
        if sock.state != sockdiag.TCP_TIME_WAIT:
            continue
        touched = {sock.sport, sock.dport} & wanted
        if not touched:
            continue
        total += 1
        for port in touched:
            by_port[port] += 1
        if recent_s is not None and sock.expires_ms / 1000 >= TIME_WAIT_S - recent_s - 1:
            recent += 1
            for port in touched:
                recent_by_port[port] += 1
    return TimeWait(total, by_port, recent, recent_by_port)


def count_time_wait_rows(
    rows: np.ndarray, ports: Collection[int], recent_s: float | None
) -> TimeWait:
    """count_time_wait over sockdiag.columns(): the same counts, as array operations."""
    wanted = sorted(set(ports))
    rows = rows[rows["state"] == sockdiag.TCP_TIME_WAIT]
    recent_rows = (
        rows["expires"] >= (TIME_WAIT_S - recent_s - 1) * 1000
        if recent_s is not None
        else np.zeros(len(rows), dtype=bool)
    )
    anywhere = np.zeros(len(rows), dtype=bool)
    by_port, recent_by_port = {}, {}
    for port in wanted:
        touched = (rows["sport"] == port) | (rows["dport"] == port)
        anywhere |= touched
        by_port[port] = int(touched.sum())
        recent_by_port[port] = int((touched & recent_rows).sum())
    return TimeWait(
        int(anywhere.sum()), by_port, int((anywhere & recent_rows).sum()), recent_by_port
    )


def time_wait(ports: Collection[int], recent_s: float | None = None) -> TimeWait:
    """TIME_WAIT sockets on ports now, from the kernel in-process (ss where netlink fails);
    IPv4, where every socket of the stack is."""
    try:
        data = sockdiag.receive(socket.AF_INET, 1 << sockdiag.TCP_TIME_WAIT, ports)
        rows = sockdiag.columns(data)
        if rows is not None:
            return count_time_wait_rows(rows, ports, recent_s)
        return count_time_wait(sockdiag.parse_dump(data)[0], ports, recent_s)
    except (OSError, ValueError):
        return ss_time_wait(ports, recent_s)


def ss_time_wait(ports: Collection[int], recent_s: float | None = None) -> TimeWait:
    """TIME_WAIT sockets on ports now; the kernel filters them (fast with 40k sockets)."""
    selector = " or ".join(f"sport = :{p} or dport = :{p}" for p in sorted(set(ports)))
    try:
        result = subprocess.run(
            ["ss", "-Htn", "-o", "state", "time-wait", f"( {selector} )"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return TimeWait(0, {}, 0, {})
    return parse_ss_time_wait(result.stdout, ports, recent_s)


def parse_ss_listen(text: str) -> tuple[int, int] | None:
    """(accept queue now, backlog) from `ss -Hltn` lines: for a LISTEN socket Recv-Q is the
    queue and Send-Q the backlog. With several sockets on the port (SO_REUSEPORT workers,
    IPv4 + IPv6) the queues add up and the backlog is each one's (the largest)."""
    found = None
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[0] == "LISTEN":
            queue, backlog = found or (0, 0)
            found = (queue + int(fields[1]), max(backlog, int(fields[2])))
    return found


def ss_listen(port: int) -> tuple[int, int] | None:
    """(accept queue, backlog) of whatever listens on port, asked from the kernel; None when
    nothing listens."""
    try:
        result = subprocess.run(
            ["ss", "-Hltn", f"sport = :{port}"], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return parse_ss_listen(result.stdout) if result.returncode == 0 else None


def listen_state(port: int) -> tuple[int, int] | None:
    """ss_listen's (accept queue, backlog), from the kernel in-process (ss where netlink fails)."""
    try:
        found = sockdiag.dump([sockdiag.TCP_LISTEN], [port])
    except (OSError, ValueError):
        return ss_listen(port)
    mine = [s for s in found if s.state == sockdiag.TCP_LISTEN and s.sport == port]
    if not mine:
        return None
    return sum(s.rqueue for s in mine), max(s.wqueue for s in mine)


def listen_backlog(port: int) -> int | None:
    """The effective listen backlog on port: what the server asked, capped by somaxconn."""
    found = listen_state(port)
    return found[1] if found else None


def parse_netstat(text: str) -> dict[str, int]:
    """/proc/net/netstat as {"TcpExt.ListenOverflows": n, ...} (header line, value line)."""
    values: dict[str, int] = {}
    lines = text.splitlines()
    for header, numbers in zip(lines[::2], lines[1::2], strict=False):
        prefix, names = header.split(":", 1)
        _, counts = numbers.split(":", 1)
        for name, count in zip(names.split(), counts.split(), strict=False):
            values[f"{prefix}.{name}"] = int(count)
    return values


def listen_counters() -> dict[str, int]:
    """The kernel's accept-queue overflow counters (system-wide, so the run's delta counts)."""
    try:
        stats = parse_netstat(Path("/proc/net/netstat").read_text())
    except OSError:
        return {}
    return {
        "listen_overflows": stats.get("TcpExt.ListenOverflows", 0),
        "listen_drops": stats.get("TcpExt.ListenDrops", 0),
    }


def _cpu_seconds(proc: psutil.Process) -> float:
    times = proc.cpu_times()
    return times.user + times.system


# psutil lists a process's descendants by reading the /proc entry of every process on the
# host: ~10 ms with a few hundred processes, per tree and sample. The kernel's own list
# (/proc/<pid>/task/<tid>/children, CONFIG_PROC_CHILDREN) is read instead where it exists,
# and a tree is re-listed only this often, and at once when one of its processes is gone.
FAMILY_REFRESH_S = 2.0


def _kernel_children(pid: int) -> list[int]:
    kids: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return kids
    for tid in tasks:
        try:
            kids += [int(k) for k in Path(f"/proc/{pid}/task/{tid}/children").read_text().split()]
        except OSError:
            continue  # the thread ended meanwhile
    return kids


def descendants(pid: int) -> list[int]:
    """The PIDs below pid, from the kernel's children lists (psutil where there are none)."""
    if not Path(f"/proc/self/task/{os.getpid()}/children").exists():
        try:
            return [p.pid for p in psutil.Process(pid).children(recursive=True)]
        except psutil.NoSuchProcess:
            return []
    found: list[int] = []
    todo = _kernel_children(pid)
    while todo:
        child = todo.pop()
        found.append(child)
        todo += _kernel_children(child)
    return found


@dataclass
class Family:
    """A process and its descendants (a server's master and workers, nginx, Locust)."""

    pid: int
    refresh_s: float = FAMILY_REFRESH_S
    _procs: list[psutil.Process] | None = None
    _next: float = 0.0

    def procs(self) -> list[psutil.Process]:
        """The family as last listed (re-listed when due or when one was gone)."""
        now = time.monotonic()
        if self._procs is None or now >= self._next:
            try:
                root = psutil.Process(self.pid)
                procs = [root]
                for pid in descendants(self.pid):
                    with contextlib.suppress(psutil.NoSuchProcess):
                        procs.append(psutil.Process(pid))
                self._procs = procs
            except psutil.NoSuchProcess:
                self._procs = []
            self._next = now + self.refresh_s
        return self._procs

    def gone(self) -> None:
        """One of them exited: list them again at the next call."""
        self._next = 0.0


@dataclass
class CpuTime:
    """CPU seconds a group of processes used since each was first seen. Counted per process,
    so one that exits keeps what it used (a sum over the live tree would drop it and could
    go negative: a Locust or nginx worker leaving the tree)."""

    _first: dict[int, float] = field(default_factory=dict)
    _last: dict[int, float] = field(default_factory=dict)

    def sample(self, family: Family) -> int:
        """Read every process of the family; the RSS bytes of those read."""
        rss = 0
        for proc in family.procs():
            try:
                seconds = _cpu_seconds(proc)
                rss += proc.memory_info().rss
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                family.gone()
                continue
            self._first.setdefault(proc.pid, seconds)
            self._last[proc.pid] = seconds
        return rss

    def seconds(self) -> float | None:
        """CPU seconds used over the samples; None when no process was ever read."""
        if not self._last:
            return None
        return sum(self._last[pid] - self._first[pid] for pid in self._last)

    def per_process(self) -> dict[int, float]:
        """CPU seconds each process used over the samples, by PID."""
        return {pid: self._last[pid] - self._first[pid] for pid in self._last}


@dataclass(frozen=True)
class Resources:
    """CPU % (100 = one core) and peak memory over the measured window; None: not measured."""

    server_cpu_pct: float | None
    server_rss_mb: float | None
    load_cpu_pct: float | None
    proxy_cpu_pct: float | None
    # The tree's RSS at the window's first sample, the load tool just started (before it
    # connected): what the peak grew from (SCENARIO=websocket-idle: memory per connection).
    server_rss_start_mb: float | None = None
    # CPU seconds of each process below the server's leader (its workers) over the window,
    # by PID: how the connections spread over the workers shows in their shares (make noise).
    # {} when the leader serves alone; None when the server runs elsewhere.
    worker_cpu_s: dict[str, float] | None = None

    def to_dict(self) -> dict[str, float | None]:
        """The record's resources."""
        return asdict(self)


@dataclass(frozen=True)
class Sockets:
    """TIME_WAIT counts (this run's sockets only), accept-queue peak and kernel counters."""

    time_wait_before: int
    time_wait_max: int
    time_wait_after: int
    time_wait_client_max: int
    time_wait_upstream_max: int | None  # None without a proxy
    time_wait_db_max: int | None  # None without a database port
    listen_queue_max: int
    listen_overflows: int
    listen_drops: int

    def to_dict(self) -> dict[str, int | None]:
        """The record's sockets."""
        return asdict(self)


@dataclass
class Sampler:
    """Samples in a background thread from start() to stop(); a dict per record section."""

    server_pid: int | None  # None: the server runs elsewhere (TARGET=), only the load is ours
    port: int | None
    load_pid: int | None = None
    interval_s: float = INTERVAL_S
    # Load processes that are not children of load_pid (Locust's workers).
    extra_load_pids: list[int] = field(default_factory=list)
    # With a proxy in front: its process and port (client <-> proxy sockets are on it).
    proxy_pid: int | None = None
    proxy_port: int | None = None
    # pgbouncer's pool of the app's database: {"sv_active": n, "cl_waiting": n, ...}.
    pool_probe: Callable[[], dict[str, int]] | None = None
    # pgbouncer's port: an app that connects per request leaves TIME_WAIT there (source 004).
    db_port: int | None = None
    pool_interval_s: float = 1.0
    # How sockets are read: in-process from the kernel (bench.overhead swaps in the `ss`
    # process starts of before, to measure what they cost).
    time_wait_probe: Callable[..., TimeWait] = time_wait
    listen_probe: Callable[[int], tuple[int, int] | None] = listen_state
    _families: dict[int, Family] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _server_cpu: CpuTime = field(default_factory=CpuTime)
    _load_cpu: CpuTime = field(default_factory=CpuTime)
    _proxy_cpu: CpuTime = field(default_factory=CpuTime)
    _rss_max: int = 0
    _rss_first: int | None = None
    _time_wait_max: int = 0
    _time_wait_client_max: int = 0
    _time_wait_upstream_max: int = 0
    _time_wait_db_max: int = 0
    _time_wait_before: int = 0
    _time_wait_now: int = 0
    _time_wait_next: float = 0.0
    _pool_max: dict[str, int] = field(default_factory=dict)
    _pool_next: float = 0.0
    _queue_max: int = 0
    _counters_first: dict[str, int] = field(default_factory=dict)
    _started: float = 0.0
    _elapsed: float = 0.0

    def _family(self, pid: int) -> Family:
        if pid not in self._families:
            self._families[pid] = Family(pid)
        return self._families[pid]

    def _tick(self, last: bool = False) -> None:
        if self.server_pid is not None:
            rss = self._server_cpu.sample(self._family(self.server_pid))
            self._rss_max = max(self._rss_max, rss)
            if self._rss_first is None:
                self._rss_first = rss
        # A load tool or proxy may be several processes (Locust workers, nginx workers).
        if self.load_pid is not None:
            for pid in (self.load_pid, *self.extra_load_pids):
                self._load_cpu.sample(self._family(pid))
        if self.proxy_pid is not None:
            self._proxy_cpu.sample(self._family(self.proxy_pid))
        if self.port is None:
            return
        now = time.monotonic()
        if last or now >= self._time_wait_next:
            # A server that closes every connection leaves tens of thousands of sockets in
            # TIME_WAIT, and listing them costs the kernel ~1 µs each: the listing is spaced so
            # that it takes at most TIME_WAIT_BUDGET of a core. Within a window shorter than
            # their 60 s they only accumulate, so the last listing (after the load) holds the
            # peak; earlier ones see the rare drop of a reused port.
            spent = time.thread_time()
            self._sample_sockets()
            spent = time.thread_time() - spent
            self._time_wait_next = now + max(self.interval_s, spent / TIME_WAIT_BUDGET)
        queue = self.listen_probe(self.port)
        self._queue_max = max(self._queue_max, queue[0] if queue else 0)
        if self.pool_probe is not None and time.monotonic() >= self._pool_next:
            # Once a second, as when each sample started a psql (bench.observe.pools now keeps one
            # session): peaks stay comparable with earlier records.
            self._pool_next = time.monotonic() + self.pool_interval_s
            try:
                pools = self.pool_probe()
            except (OSError, RuntimeError, ValueError):
                pools = {}
            for key, value in pools.items():
                self._pool_max[key] = max(self._pool_max.get(key, 0), value)

    def _sample_sockets(self) -> None:
        # Only sockets that entered TIME_WAIT during this run count: those of the primer,
        # the warmup and earlier runs linger for 60 s and are not this run's.
        front = self.proxy_port if self.proxy_port is not None else self.port
        ports = self._ports() | ({self.db_port} if self.db_port is not None else set())
        found = self.time_wait_probe(ports, time.monotonic() - self._started)
        if self.db_port is not None:
            self._time_wait_db_max = max(
                self._time_wait_db_max, found.recent_by_port.get(self.db_port, 0)
            )
        # Client <-> nginx sockets touch nginx's port, nginx <-> server ones the server's.
        on_stack = sum(found.recent_by_port.get(p, 0) for p in self._ports())
        self._time_wait_max = max(self._time_wait_max, on_stack)
        self._time_wait_now = on_stack
        self._time_wait_client_max = max(
            self._time_wait_client_max, found.recent_by_port.get(front, 0)
        )
        if self.proxy_port is not None:
            self._time_wait_upstream_max = max(
                self._time_wait_upstream_max, found.recent_by_port.get(self.port, 0)
            )

    def _ports(self) -> set[int]:
        ports = {self.port} if self.port is not None else set()
        return ports | ({self.proxy_port} if self.proxy_port is not None else set())

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._tick()

    def start(self) -> None:
        """Take the first sample and start sampling in the background."""
        self._counters_first = listen_counters()
        # Sockets the primer and warmup left in TIME_WAIT (they linger 60 s) are not this run's.
        self._started = time.monotonic()
        self._time_wait_before = self.time_wait_probe(self._ports()).total if self.port else 0
        self._tick()
        self._thread = threading.Thread(target=self._loop, name="sampler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Take the last sample and stop the thread."""
        self._tick(last=True)
        self._elapsed = time.monotonic() - self._started
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def resources(self) -> Resources:
        """CPU % (100 = one core) of the server tree and of the load tool, peak RSS of the tree."""
        elapsed = self._elapsed or 1e-9

        def pct(cpu: CpuTime) -> float | None:
            seconds = cpu.seconds()
            return round(seconds / elapsed * 100, 1) if seconds is not None else None

        remote = self.server_pid is None
        return Resources(
            server_cpu_pct=None if remote else (pct(self._server_cpu) or 0.0),
            server_rss_mb=None if remote else round(self._rss_max / 2**20, 1),
            load_cpu_pct=pct(self._load_cpu),
            proxy_cpu_pct=pct(self._proxy_cpu),
            worker_cpu_s=None if remote else self._worker_cpu_s(),
            server_rss_start_mb=(
                None if remote or self._rss_first is None else round(self._rss_first / 2**20, 1)
            ),
        )

    def _worker_cpu_s(self) -> dict[str, float]:
        """CPU seconds per process of the server's tree but its leader (JSON keys: strings)."""
        return {
            str(pid): round(seconds, 3)
            for pid, seconds in sorted(self._server_cpu.per_process().items())
            if pid != self.server_pid
        }

    def pools(self) -> dict[str, int]:
        """Peaks of pgbouncer's pool counters during the run (empty without a probe)."""
        return dict(self._pool_max)

    def sockets(self) -> Sockets:
        """TIME_WAIT before/peak/after, accept-queue peak, listen overflow/drop deltas."""
        after = listen_counters()
        return Sockets(
            time_wait_before=self._time_wait_before,
            time_wait_max=self._time_wait_max,
            time_wait_after=self._time_wait_now,
            time_wait_client_max=self._time_wait_client_max,
            time_wait_upstream_max=(
                self._time_wait_upstream_max if self.proxy_port is not None else None
            ),
            time_wait_db_max=self._time_wait_db_max if self.db_port is not None else None,
            listen_queue_max=self._queue_max,
            listen_overflows=after.get("listen_overflows", 0)
            - self._counters_first.get("listen_overflows", 0),
            listen_drops=after.get("listen_drops", 0) - self._counters_first.get("listen_drops", 0),
        )
