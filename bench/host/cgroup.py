"""CPU quotas as a container runtime sets them: a cgroup of the harness's own per server start.

Input: a quota in CPUs (CPU_QUOTA=0.5: half a CPU, 2.0: two). Output: a CpuCgroup the server's
leader is placed in before it execs (every worker it forks inherits it), its throttling
counters (`cpu.stat`) for the measured window, and its removal on every exit path.

Docker's `--cpus=N` and Kubernetes' CPU limits are the kernel's CFS bandwidth control: quota
= N × period in each period (100 ms by default). cgroup v1 (this project's machine): the
`cpu` controller at /sys/fs/cgroup/cpu, files `cpu.cfs_quota_us` and `cpu.cfs_period_us`,
`cpu.stat` with `nr_throttled` and `throttled_time` in ns. cgroup v2 (a unified hierarchy
at /sys/fs/cgroup with the cpu controller): one file `cpu.max` ("quota period"), `cpu.stat`
with `nr_throttled` and `throttled_usec` (kernel docs: admin-guide/cgroup-v1/cgroups.rst,
scheduler/sched-bwc.rst, admin-guide/cgroup-v2.rst).

Every cgroup is named `pwb-cpu-<harness pid>-<n>`: a harness that was killed leaves its
cgroups behind under a name that says whose they were, and the next start removes those
whose harness is gone (remove_leftovers).
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from itertools import count
from pathlib import Path

import psutil

PREFIX = "pwb-cpu"
NAME_RE = re.compile(rf"^{PREFIX}-(\d+)-(\d+)$")
V1_ROOT = Path("/sys/fs/cgroup/cpu")
V2_ROOT = Path("/sys/fs/cgroup")
# The kernel's default CFS period, as Docker uses it (`--cpu-period` 100000).
PERIOD_US = 100_000
# The kernel refuses quotas below 1 ms (sched-bwc.rst: "the minimum quota allowed is 1ms").
MIN_QUOTA_US = 1_000
QUOTA_MIN = MIN_QUOTA_US / PERIOD_US  # 0.01 CPU
QUOTA_MAX = 1_024.0
_numbers = count(1)


class CgroupError(RuntimeError):
    """A cgroup could not be created, joined or removed."""


@dataclass(frozen=True)
class Throttling:
    """cpu.stat counters: periods with runnable tasks, those throttled, time throttled."""

    nr_periods: int
    nr_throttled: int
    throttled_ms: float

    def minus(self, before: Throttling) -> Throttling:
        """The counters' growth since `before`."""
        return Throttling(
            self.nr_periods - before.nr_periods,
            self.nr_throttled - before.nr_throttled,
            round(self.throttled_ms - before.throttled_ms, 3),
        )


def hierarchy() -> tuple[str, Path] | None:
    """("v2", root) when the unified hierarchy has the cpu controller, ("v1", root) when the
    v1 cpu controller is mounted, else None."""
    controllers = V2_ROOT / "cgroup.controllers"
    with contextlib.suppress(OSError):
        if "cpu" in controllers.read_text().split():
            return "v2", V2_ROOT
    if (V1_ROOT / "cpu.cfs_quota_us").exists():
        return "v1", V1_ROOT
    return None


def unavailable() -> str | None:
    """Why this process cannot create CPU cgroups here (one line), or None when it can."""
    if os.geteuid() != 0:
        return "CPU_QUOTA needs root (cgroups are created under /sys/fs/cgroup): run as root"
    if hierarchy() is None:
        return (
            "CPU_QUOTA needs the kernel's cpu cgroup controller: neither "
            f"{V1_ROOT}/cpu.cfs_quota_us (v1) nor cpu in {V2_ROOT}/cgroup.controllers (v2)"
        )
    return None


def quota_us(quota: float, period_us: int = PERIOD_US) -> int:
    """CPUs -> microseconds of CPU time per period (ValueError outside QUOTA_MIN..QUOTA_MAX)."""
    if not (math.isfinite(quota) and QUOTA_MIN <= quota <= QUOTA_MAX):
        raise ValueError(f"a CPU quota is {QUOTA_MIN:g}..{QUOTA_MAX:g} CPUs, not {quota!r}")
    return max(MIN_QUOTA_US, round(quota * period_us))


def parse_cpu_stat(text: str) -> Throttling:
    """cpu.stat of either version: v1 throttled_time is in ns, v2 throttled_usec in µs."""
    values: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit():
            values[parts[0]] = int(parts[1])
    if "throttled_time" in values:
        throttled_ms = values["throttled_time"] / 1e6
    elif "throttled_usec" in values:
        throttled_ms = values["throttled_usec"] / 1e3
    else:
        raise CgroupError("cpu.stat has neither throttled_time (v1) nor throttled_usec (v2)")
    return Throttling(values.get("nr_periods", 0), values.get("nr_throttled", 0), throttled_ms)


@dataclass(frozen=True)
class CpuCgroup:
    """One harness-owned cgroup with a CPU quota."""

    path: Path
    version: str
    quota: float
    period_us: int = PERIOD_US

    @property
    def name(self) -> str:
        """The cgroup's name (its directory)."""
        return self.path.name

    @property
    def procs_file(self) -> Path:
        """Writing a PID here moves that process into the cgroup."""
        return self.path / "cgroup.procs"

    @classmethod
    def create(cls, quota: float, root: tuple[str, Path] | None = None) -> CpuCgroup:
        """A new cgroup `pwb-cpu-<pid>-<n>` with `quota` CPUs per period; CgroupError when the
        kernel refuses."""
        version, base = root or hierarchy() or ("", Path())
        if not version:
            raise CgroupError(unavailable() or "no cpu cgroup controller")
        per_period = quota_us(quota)
        path = base / f"{PREFIX}-{os.getpid()}-{next(_numbers)}"
        try:
            path.mkdir()
            if version == "v1":
                (path / "cpu.cfs_period_us").write_text(str(PERIOD_US))
                (path / "cpu.cfs_quota_us").write_text(str(per_period))
            else:
                (path / "cpu.max").write_text(f"{per_period} {PERIOD_US}")
        except OSError as exc:
            with contextlib.suppress(OSError):
                path.rmdir()
            raise CgroupError(f"cannot create cgroup {path}: {exc.strerror or exc}") from None
        return cls(path, version, quota)

    def limits(self) -> tuple[int, int]:
        """(quota µs, period µs) as the kernel holds them now."""
        if self.version == "v1":
            quota = int((self.path / "cpu.cfs_quota_us").read_text())
            return quota, int((self.path / "cpu.cfs_period_us").read_text())
        quota_text, period = (self.path / "cpu.max").read_text().split()
        return (-1 if quota_text == "max" else int(quota_text)), int(period)

    def stat(self) -> Throttling:
        """The throttling counters now."""
        try:
            return parse_cpu_stat((self.path / "cpu.stat").read_text())
        except OSError as exc:
            raise CgroupError(f"cannot read {self.path}/cpu.stat: {exc.strerror}") from None

    def pids(self) -> list[int]:
        """The processes in the cgroup now."""
        return _pids(self.path)

    def remove(self, timeout_s: float = 10.0) -> None:
        """Kill whatever is still inside (its owner stops its processes first: this is the
        backstop), then remove the directory; CgroupError if it cannot be removed."""
        remove_cgroup(self.path, timeout_s)


def _pids(path: Path) -> list[int]:
    try:
        text = (path / "cgroup.procs").read_text()
    except OSError:
        return []
    return [int(line) for line in text.split() if line.isdigit()]


def remove_cgroup(path: Path, timeout_s: float = 10.0) -> None:
    """SIGKILL every process left in the cgroup, wait for them to leave it, rmdir it."""
    deadline = time.monotonic() + timeout_s
    while path.exists():
        for pid in _pids(path):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError as exc:
            # EBUSY while a killed process is still exiting.
            if time.monotonic() > deadline:
                raise CgroupError(f"cannot remove cgroup {path}: {exc.strerror}") from None
            time.sleep(0.05)


def leftovers(base: Path, alive: Callable[[int], bool] = psutil.pid_exists) -> list[Path]:
    """Cgroups of ours under base whose harness process is gone."""
    found = []
    with contextlib.suppress(OSError):
        for path in sorted(base.iterdir()):
            match = NAME_RE.match(path.name)
            if match and path.is_dir() and not alive(int(match.group(1))):
                found.append(path)
    return found


def remove_leftovers() -> list[str]:
    """Remove the cgroups a killed harness left behind; their names."""
    root = hierarchy()
    if root is None or os.geteuid() != 0:
        return []
    removed = []
    for path in leftovers(root[1]):
        with contextlib.suppress(CgroupError):
            remove_cgroup(path)
            removed.append(path.name)
    return removed
