"""Foreign load: the CPU used on this machine by processes outside the harness's own trees.

Input: the harness's own processes (this process and every descendant: the server's tree, the
stack, the load tool; with RUNTIME=docker the container's cgroup too) and a window (start,
stop). Output: a ForeignLoad, the CPU the other processes used averaged over the window (100 =
one CPU), whether that is over THRESHOLD_PERCENT (the run is marked, repeated once and not
analysed), and the busiest of them by name; busy_now() for the one line before a first run.
"""

from __future__ import annotations

import os
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

import psutil

from bench.observe.sample import descendants

# Above this share of one CPU, averaged over the measured window, a run was measured beside
# someone else's work: on the project's 2-CPU machines 10 % of a CPU already moves req/s by
# more than the run-to-run noise (sd of ln req/s 0.025 within a session, issue 30).
THRESHOLD_PERCENT = 10.0
# A kernel thread is foreign work only when busy (this share of a CPU over the window): the
# kernel's housekeeping is part of every run.
KERNEL_BUSY_PERCENT = 5.0
# Kernel threads that carry our own traffic: loopback packets are processed in softirq
# context, on ksoftirqd when the CPUs are saturated by the run itself.
OWN_KERNEL_THREADS = ("ksoftirqd/",)
# With RUNTIME=docker the engine's daemons forward and account for the server's container.
ENGINE_DAEMONS = ("dockerd", "containerd", "containerd-shim", "docker-proxy")
INTERVAL_S = 1.0
TOP = 3
KTHREADD = 2  # the parent of every kernel thread


@dataclass(frozen=True)
class ForeignLoad:
    """The CPU others used over a window: its average and the busiest processes by name."""

    cpu_percent: float
    top: list[tuple[str, float]] = field(default_factory=list)

    @property
    def marked(self) -> bool:
        """Above THRESHOLD_PERCENT: the run is under foreign load."""
        return self.cpu_percent > THRESHOLD_PERCENT

    def to_fields(self) -> dict[str, object]:
        """The record's foreign_cpu_percent, foreign_load and foreign_top."""
        return {
            "foreign_cpu_percent": round(self.cpu_percent, 1),
            "foreign_load": self.marked,
            "foreign_top": [[name, round(pct, 1)] for name, pct in self.top],
        }

    def describe(self) -> str:
        """`35 % of a CPU (burner 30 %, dockerd 4 %)`."""
        names = ", ".join(f"{name} {pct:.0f} %" for name, pct in self.top)
        return f"{self.cpu_percent:.0f} % of a CPU" + (f" ({names})" if names else "")


def own_pids() -> set[int]:
    """This process and every process below it."""
    me = os.getpid()
    return {me, *descendants(me)}


@dataclass
class _Seen:
    created: float
    name: str
    cpu_s: float
    kernel: bool


def _snapshot() -> dict[int, _Seen]:
    found: dict[int, _Seen] = {}
    for proc in psutil.process_iter(["name", "cpu_times", "create_time", "ppid"]):
        info = proc.info
        times = info.get("cpu_times")
        if times is None or info.get("create_time") is None:
            continue  # gone, or not ours to read
        kernel = info.get("ppid") == KTHREADD or proc.pid == KTHREADD
        name = str(info.get("name") or proc.pid)
        found[proc.pid] = _Seen(info["create_time"], name, times.user + times.system, kernel)
    return found


class ForeignSampler:
    """Samples every process's CPU time through a window; what the harness's own trees used
    is left out. Processes that start and end between two samples are missed (an
    undercount: a run is never marked for work nobody saw)."""

    def __init__(
        self,
        own: Callable[[], set[int]] = own_pids,
        interval_s: float = INTERVAL_S,
        excluded_names: tuple[str, ...] = (),
    ) -> None:
        self.own = own
        self.interval_s = interval_s
        self.excluded_names = excluded_names
        self._last: dict[int, _Seen] = {}
        self._last_t = 0.0
        self._started = 0.0
        self._ended: float | None = None
        self._by_name: dict[str, float] = defaultdict(float)
        self._kernel: dict[tuple[int, float], tuple[str, float]] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _foreign(self, pid: int, seen: _Seen, own: set[int]) -> bool:
        if pid in own or seen.name.startswith(self.excluded_names):
            return False
        return not (seen.kernel and seen.name.startswith(OWN_KERNEL_THREADS))

    def tick(self) -> None:
        """One sample: each foreign process's CPU time since the last sample is added."""
        own = self.own()
        now_t = time.monotonic()  # taken before reading: a snapshot takes a while when busy
        now = _snapshot()
        wall = time.time()
        for pid, seen in now.items():
            if not self._foreign(pid, seen, own):
                continue
            before = self._last.get(pid)
            if before is not None and before.created == seen.created:
                used = seen.cpu_s - before.cpu_s
            elif seen.created >= wall - (now_t - self._last_t):
                used = seen.cpu_s  # started since the last sample: all of its CPU is new
            else:
                continue  # first seen now, but older: its earlier CPU is not this window's
            if seen.kernel:
                key = (pid, seen.created)
                self._kernel[key] = (seen.name, self._kernel.get(key, (seen.name, 0.0))[1] + used)
            else:
                self._by_name[seen.name] += max(0.0, used)
        self._last, self._last_t = now, now_t

    def start(self) -> None:
        """The window starts: a first sample now, then one every interval_s."""
        self._last_t = self._started = time.monotonic()
        self._last = _snapshot()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="foreign")
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.tick()

    def stop(self) -> None:
        """The window ends: a last sample."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.tick()
        self._ended = self._last_t

    def result(self) -> ForeignLoad:
        """The foreign CPU over the window, averaged (100 = one CPU)."""
        elapsed = max(1e-6, (self._ended or time.monotonic()) - self._started)
        used = dict(self._by_name)
        for name, seconds in self._kernel.values():
            if seconds / elapsed * 100 > KERNEL_BUSY_PERCENT:
                used[name] = used.get(name, 0.0) + seconds
        percents = {name: s / elapsed * 100 for name, s in used.items()}
        top = sorted(percents.items(), key=lambda item: -item[1])[:TOP]
        return ForeignLoad(sum(percents.values()), [(n, p) for n, p in top if p >= 0.5])


def busy_now(seconds: float = 1.0) -> ForeignLoad:
    """The CPU others use right now, over `seconds` (before a first run)."""
    sampler = ForeignSampler(interval_s=seconds)
    sampler.start()
    time.sleep(seconds)
    sampler.stop()
    return sampler.result()
