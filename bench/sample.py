"""System samples during a measured run: CPU and memory of the server's process tree and of
the load tool, TIME_WAIT sockets, the accept queue, and the kernel's listen-overflow counters.

Input: the server's PID and port, the load tool's PID. Output: `resources` and `sockets`
dicts for the record. Parsers take /proc text so they are tested over captured fixtures.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

TCP_LISTEN = "0A"
TCP_TIME_WAIT = "06"
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


def parse_time_wait(text: str, port: int) -> int:
    """TIME_WAIT sockets whose local or remote port is `port` (either side closed first)."""
    count = 0
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 4 or fields[3] != TCP_TIME_WAIT:
            continue
        local = int(fields[1].rsplit(":", 1)[1], 16)
        remote = int(fields[2].rsplit(":", 1)[1], 16)
        if port in (local, remote):
            count += 1
    return count


def time_wait(port: int) -> int:
    """TIME_WAIT sockets on port now, IPv4 and IPv6."""
    total = 0
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            total += parse_time_wait(Path(name).read_text(), port)
        except OSError:
            continue
    return total


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


@dataclass
class Sampler:
    """Samples in a background thread from start() to stop(); a dict per record section."""

    server_pid: int
    port: int
    load_pid: int | None = None
    interval_s: float = INTERVAL_S
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _cpu_first: dict[int, float] = field(default_factory=dict)
    _cpu_last: dict[int, float] = field(default_factory=dict)
    _load_first: float | None = None
    _load_last: float | None = None
    _rss_max: int = 0
    _time_wait_max: int = 0
    _time_wait_before: int = 0
    _queue_max: int = 0
    _counters_first: dict[str, int] = field(default_factory=dict)
    _started: float = 0.0
    _elapsed: float = 0.0

    def _tree(self) -> list[psutil.Process]:
        try:
            root = psutil.Process(self.server_pid)
            return [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def _tick(self) -> None:
        rss = 0
        for proc in self._tree():
            try:
                seconds = _cpu_seconds(proc)
                rss += proc.memory_info().rss
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
            self._cpu_first.setdefault(proc.pid, seconds)
            self._cpu_last[proc.pid] = seconds
        self._rss_max = max(self._rss_max, rss)
        if self.load_pid is not None:
            try:
                seconds = _cpu_seconds(psutil.Process(self.load_pid))
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                seconds = None
            if seconds is not None:
                if self._load_first is None:
                    self._load_first = seconds
                self._load_last = seconds
        self._time_wait_max = max(self._time_wait_max, time_wait(self.port))
        self._queue_max = max(self._queue_max, listen_queue(self.port) or 0)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._tick()

    def start(self) -> None:
        """Take the first sample and start sampling in the background."""
        self._counters_first = listen_counters()
        # Sockets the primer and warmup left in TIME_WAIT (they linger 60 s) are not this run's.
        self._time_wait_before = time_wait(self.port)
        self._started = time.monotonic()
        self._tick()
        self._thread = threading.Thread(target=self._loop, name="sampler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Take the last sample and stop the thread."""
        self._tick()
        self._elapsed = time.monotonic() - self._started
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def resources(self) -> dict[str, float | None]:
        """CPU % (100 = one core) of the server tree and of the load tool, peak RSS of the tree."""
        elapsed = self._elapsed or 1e-9
        server_cpu = sum(self._cpu_last[p] - self._cpu_first[p] for p in self._cpu_last)
        load_cpu = (
            (self._load_last - self._load_first) / elapsed * 100
            if self._load_first is not None and self._load_last is not None
            else None
        )
        return {
            "server_cpu_pct": round(server_cpu / elapsed * 100, 1),
            "server_rss_mb": round(self._rss_max / 2**20, 1),
            "load_cpu_pct": round(load_cpu, 1) if load_cpu is not None else None,
        }

    def sockets(self) -> dict[str, int]:
        """TIME_WAIT before/peak/after, accept-queue peak, listen overflow/drop deltas."""
        after = listen_counters()
        return {
            "time_wait_before": self._time_wait_before,
            "time_wait_max": self._time_wait_max,
            "time_wait_after": time_wait(self.port),
            "listen_queue_max": self._queue_max,
            "listen_overflows": after.get("listen_overflows", 0)
            - self._counters_first.get("listen_overflows", 0),
            "listen_drops": after.get("listen_drops", 0)
            - self._counters_first.get("listen_drops", 0),
        }
