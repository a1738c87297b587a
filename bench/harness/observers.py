"""What the production runs follow during a measured window, beside the load: the cgroup's
throttling (CPU_QUOTA), the reload trigger and what the load saw around it (LIFECYCLE), the
RSS of every server process (make soak) and the workers started (RECYCLE).

Input: the Served (its `server` and `cgroup` are None where the site has none: only a local
server, bench.stack.site.LocalServed, has a leader to signal and processes to sample), the
window's length and what the run asked for. Output:
start()/stop() around the load tool, then outcome(): the Measurement's cgroup, lifecycle,
series and recycles (None for whatever was not asked).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from bench.host.cgroup import CpuCgroup, Throttling
from bench.host.container_cgroup import ContainerCgroup, Snapshot, window
from bench.load import LoadResult
from bench.observe import lifecycle, soak
from bench.observe.foreign import ENGINE_DAEMONS, ForeignSampler, own_pids
from bench.observe.recycle import WorkerWatch

if TYPE_CHECKING:
    from bench.harness.served import Served


@dataclass
class Observers:
    """The observers one measured window needs (each None when not asked for)."""

    served: Served
    duration_s: float
    event: str | None = None
    group: CpuCgroup | None = None
    before: Throttling | None = None
    trigger: lifecycle.Trigger | None = None
    rss: soak.RssSampler | None = None
    workers: WorkerWatch | None = None
    # RUNTIME=docker: the container's cgroup, its counters when the window started
    container: ContainerCgroup | None = None
    container_before: Snapshot | None = None
    container_peak_reset: bool = False
    # the CPU used by processes outside the harness's trees (a server started here only)
    foreign: ForeignSampler | None = None

    @classmethod
    def of(
        cls,
        served: Served,
        duration_s: float,
        event: str | None = None,
        soak_interval_s: float | None = None,
    ) -> Observers:
        """The observers a window of this Served needs; the cgroup's counters are read now."""
        found = cls(served, duration_s, event)
        if served.cgroup is not None:
            found.group, found.before = served.cgroup, served.cgroup.stat()
        container = getattr(served, "container_cgroup", None)
        if isinstance(container, ContainerCgroup):
            found.container = container
            found.container_peak_reset = container.reset_peak()
            found.container_before = container.snapshot()
        server = served.server
        if event == "reload" and server is not None:
            found.trigger = lifecycle.Trigger(duration_s / 2, served.reload)
        if soak_interval_s is not None and server is not None:
            count = soak.samples_in(duration_s, soak_interval_s)
            found.rss = soak.RssSampler(server.proc.pid, soak_interval_s, count)
        if server is not None and "max_requests" in server.knobs:
            found.workers = WorkerWatch(server.proc.pid)
        # a container first: its server has a leader here too (the `docker run` client),
        # but its processes are the engine's children, not ours; counted as foreign, every
        # run in a container was marked and measured again (container-limits, 2026-11-27)
        if found.container is not None:
            box = found.container
            procs = box.dirs["unified" if box.version == "v2" else "cpu"] / "cgroup.procs"
            found.foreign = ForeignSampler(
                lambda: own_pids() | _pids(procs), excluded_names=ENGINE_DAEMONS
            )
        elif server is not None:
            found.foreign = ForeignSampler()
        return found

    def start(self) -> None:
        """Just before the load tool starts."""
        for observer in (self.foreign, self.trigger, self.rss, self.workers):
            if observer is not None:
                observer.start()

    def stop(self) -> None:
        """When the load tool has ended (or failed)."""
        for observer in (self.trigger, self.rss, self.workers, self.foreign):
            if observer is not None:
                observer.stop()

    def outcome(self, result: LoadResult, rate: int | None) -> dict[str, object]:
        """The Measurement's cgroup, lifecycle, series and recycles."""
        return {
            "cgroup": self._cgroup(),
            "container": self._container(),
            "lifecycle": self._lifecycle(result, rate),
            "series": self._series(result),
            "recycles": self._recycles(result, rate),
            "foreign": self.foreign.result() if self.foreign is not None else None,
        }

    def _container(self) -> dict[str, object] | None:
        """The container's CPU, throttling, memory and OOM kills over the window."""
        if self.container is None or self.container_before is None:
            return None
        after = self.container.snapshot()
        return window(self.container, self.container_before, after, self.container_peak_reset)

    def _recycles(self, result: LoadResult, rate: int | None) -> dict[str, object] | None:
        """The workers started in the window (RECYCLE=), and the arrivals answered late
        (bench.observe.lifecycle.late: open-loop runs, which keep a per-request file)."""
        if self.workers is None or self.served.server is None:
            return None
        found: dict[str, object] = dict(self.workers.outcome(self.served.server.knobs))
        if result.per_request is not None and rate is not None:
            rows = lifecycle.parse_requests(result.per_request)
            found |= lifecycle.late(rows, rate, self.duration_s)
        return found

    def _cgroup(self) -> dict[str, object] | None:
        """The quota and the throttling since the window started (CPU_QUOTA=)."""
        if self.group is None or self.before is None:
            return None
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

    def _lifecycle(self, result: LoadResult, rate: int | None) -> dict[str, object] | None:
        """When the signal went, and what the load saw around it (LIFECYCLE=reload)."""
        trigger = self.trigger
        if trigger is None:
            return None
        server = self.served.server
        outcome: dict[str, object] = {
            "event": self.event,
            "signal": server.spec.reload_signal if server is not None else None,
            "planned_at_s": trigger.planned_at_s,
            "at_s": trigger.fired_at_s,
        }
        if trigger.error is not None or trigger.fired_at_s is None:
            return outcome | {"error": trigger.error or "the run ended before the planned second"}
        requests = result.per_request
        if requests is None or rate is None:
            return outcome | {"error": "no per-request file: LIFECYCLE needs an open-loop tool"}
        errors = result.errors.to_dict()
        return outcome | lifecycle.analyse(
            requests, errors, rate, self.duration_s, trigger.fired_at_s
        )

    def _series(self, result: LoadResult) -> dict[str, object] | None:
        """RSS per process and in all, its slope, and the rate per minute (make soak)."""
        rss = self.rss
        if rss is None:
            return None
        requests = result.per_request
        minutes = soak.per_minute(requests, self.duration_s) if requests is not None else None
        return {
            "interval_s": rss.interval_s,
            **soak.rss_series(rss.times, rss.rss, rss.pid),
            "minutes": minutes,
        }


def _pids(procs: Path) -> set[int]:
    """The PIDs a cgroup.procs file lists (none when it cannot be read)."""
    try:
        return {int(line) for line in procs.read_text().split()}
    except (OSError, ValueError):
        return set()
