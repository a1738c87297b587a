"""One started server's measurements: each point measured (bench.harness.measure) and recorded
(bench.harness.recorder), with the failure rules of a block in one place.

Input: the harness (site, load tool, recorder), an arm's Options, the facts about the started
server and its Served. Output: a record per point; the Measurement of a point that was
measured, None when it failed (recorded), BlockVoid when nothing more can be measured on
this server (the watchdog saw it or the stack die; recorded).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from bench.core import plan
from bench.core.scenario import SCENARIOS
from bench.harness.measure import Measurement, Served, Settings, measure_point
from bench.harness.recorder import Recorder, ServerFacts
from bench.host.procs import Interrupted
from bench.load import LoadAborted, LoadError, LoadTool

if TYPE_CHECKING:
    from bench.core.progress import Progress
    from bench.core.registry import ServerSpec
    from bench.host.arch import Emulator
    from bench.host.prepare import Environment, Prepared
    from bench.host.procs import ProcessTable


class Site(Protocol):
    """Where servers run (bench.stack.site.LocalSite, RemoteSite; a fake in the tests)."""

    emulator: Emulator | None  # ARCH= another arch: the user-mode emulator; else None

    def prepare(
        self,
        specs: list[ServerSpec],
        arch: str,
        say: Callable[[str], None],
        python: str | None = None,
    ) -> dict[str, Prepared]: ...
    def open(self) -> None: ...
    def problem(self) -> str | None: ...
    def stack_logs(self) -> dict[str, str]: ...
    def cpus(self) -> int: ...
    def knobs(self, spec: ServerSpec, overrides: dict[str, int]) -> dict[str, int]: ...
    def serve(
        self,
        spec: ServerSpec,
        knobs: dict[str, int],
        environment: Environment,
        opts: plan.Options,
        log_name: str,
    ) -> Served: ...
    def logs(self, served: Served) -> dict[str, str]: ...
    def stop(self, served: Served) -> None: ...


@dataclass
class Harness:
    """What one invocation runs with: the site, the load tool, the recorder, the table."""

    site: Site
    tool: LoadTool
    recorder: Recorder
    table: ProcessTable
    run_dir: Path
    progress: Progress
    # make capacity: each search's result, carried from trial 1 to the later trials' repeats
    knees: dict = field(default_factory=dict)
    # TRIALS=auto's race: the closing lines printed at the end of the output
    closing: list[str] = field(default_factory=list)


Judge = Callable[[Measurement | None], dict]


class BlockVoid(RuntimeError):
    """The server or the stack broke during load: no further point of this block counts."""

    def __init__(self, reason: str, logs: dict[str, str]) -> None:
        super().__init__(reason)
        self.logs = logs


@dataclass
class Session:
    """Points measured against one started server."""

    h: Harness
    opts: plan.Options
    facts: ServerFacts
    served: Served
    primed: set[str] = field(default_factory=set)
    # The server tree's RSS before its first load of a scenario that needs a fresh start
    # (websocket-idle), by scenario: what a repeat or a later point on this start grew from.
    rss_from: dict[str, float] = field(default_factory=dict)

    def settings(self) -> Settings:
        """What every point of this arm shares."""
        placement = self.h.recorder.placement
        return Settings(
            table=self.h.table,
            run_dir=self.h.run_dir,
            duration_s=self.opts.duration_s,
            warmup_s=self.opts.warmup_s,
            keepalive=self.opts.keepalive,
            timeout_s=self.opts.study.load_timeout_s,
            load_cpus=placement.load_cpus if placement.pinned else None,
            lifecycle=self.opts.lifecycle,
            soak_interval_s=self.opts.mode.soak_interval_s,
            protocol=self.opts.protocol,
            streams=self.opts.streams,
        )

    def measure(
        self, run: plan.RunSpec, judge: Judge | None = None, repeat_of: str | None = None
    ) -> Measurement | None:
        """Measure and record one point; None if it failed (its record says why). `judge`
        turns the outcome into metadata for the record (a capacity step's verdict). A trial's
        run under foreign load is kept (marked, not analysed) and measured once more: the
        repeat's record says which run it replaces (`repeat_of`), and is not repeated again."""
        meta: dict | None = None
        step = plan.run_seconds(self.opts, run.scenario in self.primed or not self.h.tool.primes)
        rate = f" at {run.rate} req/s" if run.rate is not None else ""
        of = "auto" if self.opts.precision is not None else self.opts.trials
        trial = "warm-up start" if run.trial == 0 else f"trial {run.trial}/{of}"
        if run.slice:
            trial += f" slice {run.slice}"
        self.h.progress.say(
            f"{run.server} {run.scenario}{rate} c={run.concurrency} {trial}: {step} s"
        )
        try:
            measured = measure_point(self.settings(), self.h.tool, self.served, run, self.primed)
        except LoadAborted as exc:
            logs = self.h.site.logs(self.served)
            if self.facts.container is not None and hasattr(self.served, "facts"):
                # What the container counted until it broke (its OOM kills): kept.
                self.facts.container |= self.served.facts()
            meta = judge(None) if judge else None
            self.h.recorder.failed(self.opts, (run,), self.facts, str(exc), logs, meta=meta)
            raise BlockVoid(str(exc), logs) from None
        except (KeyboardInterrupt, Interrupted) as exc:
            reason = f"interrupted by {str(exc) or 'SIGINT'} during load"
            logs = self.h.site.logs(self.served)
            meta = judge(None) if judge else None
            self.h.recorder.failed(self.opts, (run,), self.facts, reason, logs, meta=meta)
            # Which run it was, for the one line the harness prints (bench.harness.run).
            which = "warm-up start" if run.trial == 0 else f"trial {run.trial}"
            exc.add_note(f"{run.server} {run.scenario}{rate} c={run.concurrency} {which}")
            raise
        except LoadError as exc:
            meta = judge(None) if judge else None
            self.h.recorder.failed(
                self.opts, (run,), self.facts, str(exc), exc.raw, quiet=True, meta=meta
            )
            return None
        finally:
            self.h.progress.remaining_s -= step
        measured = self._grown_from_start(run, measured)
        meta = judge(measured) if judge else None
        if repeat_of is not None:
            meta = {**(meta or {}), "repeat_of": repeat_of}
        self.h.recorder.measured(self.opts, run, self.facts, measured, meta=meta)
        foreign = measured.foreign
        # a warm-up start's run is never analysed: nothing to repeat it for
        warmup = self.facts.meta.get("warmup_start") is True
        if foreign is not None and foreign.marked and repeat_of is None and not warmup:
            marked = self.h.recorder.records[-1].run_id
            self.h.progress.say(
                f"foreign load: {foreign.describe()} beside this run: marked, measured once more"
            )
            return self.measure(run, judge, repeat_of=marked)
        return measured

    def _grown_from_start(self, run: plan.RunSpec, measured: Measurement) -> Measurement:
        """A scenario that does not warm (websocket-idle) measures what connections cost: its
        server_rss_start_mb is this start's first, before any of its connections (a repeat
        on the same start, or a later point, reuses the memory the first one's freed)."""
        declared = SCENARIOS.get(run.scenario)
        start = measured.resources.server_rss_start_mb if measured.resources else None
        if declared is None or declared.warms or start is None or measured.resources is None:
            return measured
        first = self.rss_from.setdefault(run.scenario, start)
        resources = replace(measured.resources, server_rss_start_mb=first)
        return replace(measured, resources=resources)

    def measure_all(self, runs: tuple[plan.RunSpec, ...]) -> None:
        """Measure a fixed list of points; when one voids the block, the rest are recorded
        failed with its reason and logs."""
        for index, run in enumerate(runs):
            try:
                self.measure(run)
            except BlockVoid as exc:
                rest = runs[index + 1 :]
                self.h.recorder.failed(self.opts, rest, self.facts, str(exc), exc.logs)
                raise
