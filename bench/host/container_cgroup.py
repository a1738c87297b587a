"""A container's own cgroup, read from the host: CPU time, throttling, memory and OOM kills.

Input: the host pid of a process inside the container (docker inspect's State.Pid) and the
host's /proc. Output: a ContainerCgroup whose snapshot() holds the counters now, and window()
the growth between two snapshots as a record's `container` keys. The cgroup is found from
/proc/<pid>/cgroup and the cgroup mounts in /proc/self/mountinfo, so the engine's cgroup
driver (cgroupfs: /docker/<id>; systemd: docker-<id>.scope) does not matter.

Files (kernel docs admin-guide/cgroup-v1/{cpuacct,memory}.rst, scheduler/sched-bwc.rst,
admin-guide/cgroup-v2.rst):
- v1: cpu/cpu.cfs_quota_us, cpu.cfs_period_us, cpu.stat (nr_periods, nr_throttled,
  throttled_time ns); cpuacct/cpuacct.usage (ns); memory/memory.limit_in_bytes,
  memory.usage_in_bytes, memory.max_usage_in_bytes (peak; writing 0 resets it),
  memory.oom_control (oom_kill, kernels >= 4.13), memory.failcnt, memory.stat (total_rss:
  the anonymous memory of the cgroup and its children, the part no reclaim can free without
  swap; usage_in_bytes also holds page cache the kernel reclaims before it kills).
- v2 (one directory): cpu.max ("quota period" or "max period"), cpu.stat (usage_usec,
  nr_periods, nr_throttled, throttled_usec), memory.max, memory.current, memory.peak
  (kernels >= 5.19; since the cgroup was made), memory.events (oom, oom_kill), memory.stat
  (anon).
OOM kills: the cgroup's counter counts every process the kernel killed in it since it was made
(a worker its master respawns included); the engine's State.OOMKilled covers the container's
first process only, and a `--rm` container is gone before it could be read.
A hybrid host (v1 controllers, plus a cgroup2 mount without controllers) is read as v1: the
controllers are where the v1 mounts say.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from pathlib import Path

from bench.host.cgroup import Throttling, parse_cpu_stat

V1_CONTROLLERS = ("cpu", "cpuacct", "memory")


class ContainerCgroupError(RuntimeError):
    """The container's cgroup cannot be found or read."""


def parse_mountinfo(text: str) -> tuple[dict[str, Path], Path | None]:
    """(v1 controller -> mount point, the cgroup2 mount point or None) from mountinfo."""
    v1: dict[str, Path] = {}
    v2: Path | None = None
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        fields, tail = left.split(), right.split()
        if len(fields) < 5 or len(tail) < 3:
            continue
        mount_point, fstype, options = Path(fields[4]), tail[0], tail[2].split(",")
        if fstype == "cgroup2":
            v2 = mount_point
        elif fstype == "cgroup":
            for controller in options:
                if controller in V1_CONTROLLERS:
                    v1.setdefault(controller, mount_point)
    return v1, v2


def parse_proc_cgroup(text: str) -> tuple[dict[str, str], str | None]:
    """(v1 controller -> path, the v2 path or None) from /proc/<pid>/cgroup."""
    v1: dict[str, str] = {}
    v2: str | None = None
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        hierarchy_id, controllers, path = parts
        if hierarchy_id == "0" and controllers == "":
            v2 = path
        for controller in controllers.split(","):
            if controller in V1_CONTROLLERS:
                v1[controller] = path
    return v1, v2


def anon_bytes(memory_stat: str, version: str) -> int | None:
    """The anonymous memory in a memory.stat (v1: total_rss, the hierarchy's, else rss;
    v2: anon); None when the file has neither."""
    values = _keyed(memory_stat)
    keys = ("total_rss", "rss") if version == "v1" else ("anon",)
    return next((values[k] for k in keys if k in values), None)


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError as exc:
        raise ContainerCgroupError(f"cannot read {path}: {exc.strerror}") from None


def _keyed(text: str) -> dict[str, int]:
    values = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].lstrip("-").isdigit():
            values[parts[0]] = int(parts[1])
    return values


@dataclass(frozen=True)
class Snapshot:
    """The container's counters at one moment."""

    at: float  # time.monotonic()
    cpu_usage_ns: int
    throttling: Throttling
    memory_bytes: int
    memory_peak_bytes: int | None
    oom_kills: int | None
    memory_failcnt: int | None
    memory_anon_bytes: int | None = None


@dataclass(frozen=True)
class ContainerCgroup:
    """Where one container's cgroup files are (v1: one directory per controller)."""

    version: str  # "v1" or "v2"
    dirs: dict[str, Path]  # v1: cpu, cpuacct, memory; v2: "unified"

    @classmethod
    def of_pid(cls, pid: int, proc: Path = Path("/proc")) -> ContainerCgroup:
        """The cgroup of host pid `pid` (a process in the container)."""
        mounts_v1, mount_v2 = parse_mountinfo(_read(proc / "self" / "mountinfo"))
        paths_v1, path_v2 = parse_proc_cgroup(_read(proc / str(pid) / "cgroup"))
        return cls.locate(mounts_v1, mount_v2, paths_v1, path_v2)

    @classmethod
    def locate(
        cls,
        mounts_v1: dict[str, Path],
        mount_v2: Path | None,
        paths_v1: dict[str, str],
        path_v2: str | None,
    ) -> ContainerCgroup:
        """v1 when the cpu and memory controllers are v1 mounts, else v2 when the unified
        hierarchy holds them; ContainerCgroupError in one line otherwise."""
        if all(c in mounts_v1 and c in paths_v1 for c in V1_CONTROLLERS):
            return cls("v1", {c: mounts_v1[c] / paths_v1[c].lstrip("/") for c in V1_CONTROLLERS})
        if mount_v2 is not None and path_v2 is not None:
            unified = mount_v2 / path_v2.lstrip("/")
            controllers = set()
            with contextlib.suppress(OSError):
                controllers = set((unified / "cgroup.controllers").read_text().split())
            if {"cpu", "memory"} <= controllers:
                return cls("v2", {"unified": unified})
        raise ContainerCgroupError(
            "the container's cpu and memory controllers are neither v1 mounts nor enabled in "
            "the cgroup v2 hierarchy: its CPU and memory cannot be read"
        )

    def _dir(self, controller: str) -> Path:
        return self.dirs["unified"] if self.version == "v2" else self.dirs[controller]

    def limits(self) -> dict[str, int | None]:
        """quota_us (None: no quota), period_us, memory_limit_bytes (None: no limit)."""
        if self.version == "v1":
            quota = int(_read(self.dirs["cpu"] / "cpu.cfs_quota_us"))
            period = int(_read(self.dirs["cpu"] / "cpu.cfs_period_us"))
            memory = int(_read(self.dirs["memory"] / "memory.limit_in_bytes"))
            # v1 writes "no limit" as the largest page-aligned long.
            return {
                "quota_us": None if quota < 0 else quota,
                "period_us": period,
                "memory_limit_bytes": None if memory >= 2**62 else memory,
            }
        quota_text, period = _read(self._dir("cpu") / "cpu.max").split()[:2]
        memory_text = _read(self._dir("memory") / "memory.max").strip()
        return {
            "quota_us": None if quota_text == "max" else int(quota_text),
            "period_us": int(period),
            "memory_limit_bytes": None if memory_text == "max" else int(memory_text),
        }

    def pids(self) -> set[int]:
        """The host pids in the container's cgroup now."""
        with contextlib.suppress(ContainerCgroupError):
            text = _read(self._dir("cpu") / "cgroup.procs")
            return {int(p) for p in text.split() if p.isdigit()}
        return set()

    def reset_peak(self) -> bool:
        """Start the memory peak over (v1: write 0 to memory.max_usage_in_bytes); False where
        it cannot be (v2's memory.peak counts from the cgroup's start)."""
        if self.version != "v1":
            return False
        try:
            (self.dirs["memory"] / "memory.max_usage_in_bytes").write_text("0")
        except OSError:
            return False
        return True

    def snapshot(self) -> Snapshot:
        """The counters now."""
        cpu_stat = _read(self._dir("cpu") / "cpu.stat")
        throttling = parse_cpu_stat(cpu_stat)
        if self.version == "v1":
            memory_dir = self.dirs["memory"]
            return Snapshot(
                time.monotonic(),
                int(_read(self.dirs["cpuacct"] / "cpuacct.usage")),
                throttling,
                int(_read(memory_dir / "memory.usage_in_bytes")),
                int(_read(memory_dir / "memory.max_usage_in_bytes")),
                self.oom_kills(),
                int(_read(memory_dir / "memory.failcnt")),
                self._anon_bytes(),
            )
        unified = self.dirs["unified"]
        peak = None
        with contextlib.suppress(ContainerCgroupError, ValueError):
            peak = int(_read(unified / "memory.peak"))
        return Snapshot(
            time.monotonic(),
            _keyed(cpu_stat).get("usage_usec", 0) * 1000,
            throttling,
            int(_read(unified / "memory.current")),
            peak,
            self.oom_kills(),
            None,
            self._anon_bytes(),
        )

    def _anon_bytes(self) -> int | None:
        """The anonymous memory now, None where memory.stat cannot be read."""
        try:
            return anon_bytes(_read(self._dir("memory") / "memory.stat"), self.version)
        except ContainerCgroupError:
            return None

    def oom_kills(self) -> int | None:
        """The processes the kernel OOM-killed in the cgroup since it was made (v1:
        memory.oom_control's oom_kill, None on kernels before 4.13; v2: memory.events')."""
        name = "memory.oom_control" if self.version == "v1" else "memory.events"
        return _keyed(_read(self._dir("memory") / name)).get("oom_kill")


def window(group: ContainerCgroup, before: Snapshot, after: Snapshot, peak_reset: bool) -> dict:
    """The record's `container` keys measured over [before, after]."""
    seconds = max(after.at - before.at, 1e-9)
    delta = after.throttling.minus(before.throttling)
    limits = group.limits()

    def mb(value: int | None) -> float | None:
        return None if value is None else round(value / 2**20, 1)

    return {
        "cgroup_version": group.version,
        **limits,
        "cpu_pct": round((after.cpu_usage_ns - before.cpu_usage_ns) / 1e9 / seconds * 100, 1),
        "nr_periods": delta.nr_periods,
        "nr_throttled": delta.nr_throttled,
        "throttled_ms": delta.throttled_ms,
        "memory_mb_end": mb(after.memory_bytes),
        "memory_peak_mb": mb(after.memory_peak_bytes),
        # v1's peak is reset when the window starts; v2's memory.peak counts from the start.
        "memory_peak_scope": "window" if peak_reset else "container",
        "oom_kills": (
            None
            if after.oom_kills is None or before.oom_kills is None
            else after.oom_kills - before.oom_kills
        ),
        "memory_failcnt": (
            None
            if after.memory_failcnt is None or before.memory_failcnt is None
            else after.memory_failcnt - before.memory_failcnt
        ),
        # Anonymous memory at the window's end (what a memory limit must hold: no swap).
        "memory_anon_mb_end": mb(after.memory_anon_bytes),
        # Since the container started: kills at start and during verification count too.
        "oom_kills_total": after.oom_kills,
    }
