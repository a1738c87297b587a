"""One harness run: the plan's stages in order, every process stopped on every exit path.

Input: validated Options (one per study arm). Output: one record per planned run under
RESULTS (ok, failed with its reason and logs, or unsupported), summary.md rebuilt, and the
exit status (0 ok, 1 a run failed, 130 interrupted). Stages: plan -> load tool and server
environments prepared -> shared stack started -> per (trial, server): start, verify, then per
point: measure (bench.harness.measure), record (bench.harness.recorder) -> stop.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from bench.core import plan, record
from bench.core.progress import Progress
from bench.core.protocol import HTTP1
from bench.core.registry import ServerSpec, load_all
from bench.core.runid import run_dir_name
from bench.core.scenario import SCENARIOS
from bench.harness import racing, slices
from bench.harness.capacity import search_capacity
from bench.harness.preflight import AppRejected, preflight_app
from bench.harness.recorder import Recorder, ServerFacts
from bench.harness.session import BlockVoid, Harness, Session, Site
from bench.host import speed
from bench.host.metadata import host_metadata
from bench.host.placement import cpu_placement
from bench.host.prepare import Environment, Unavailable
from bench.host.procs import Interrupted, ProcessTable, signals_ignored, signals_raise
from bench.host.state import LockedError, machine_lock, state_base
from bench.host.venv import tool_version, venv_name
from bench.load import LoadError
from bench.load import tool as load_tool
from bench.observe.foreign import busy_now
from bench.observe.recycle import jitter
from bench.report import precision
from bench.report import summary as report
from bench.stack.site import LocalSite, RemoteSite, ServeError, read_log


def clock() -> float:
    """Seconds on a clock that only moves forward: TRIALS=auto's budget (tests pass a fake)."""
    return time.monotonic()


class StackDied(RuntimeError):
    """PostgreSQL or pgbouncer died: no later run can be measured."""


def block_facts(
    h: Harness, opts: plan.Options, block: plan.Block, spec: ServerSpec, env: Environment
) -> tuple[ServerFacts, tuple[plan.RunSpec, ...]]:
    """The block's facts and the runs the server can serve (the others recorded unsupported;
    none left: nothing to start)."""
    source, tuned = opts.tuned.get(spec.id, (None, {}))
    facts = ServerFacts(spec.app, h.site.knobs(spec, {**tuned, **opts.overrides}), env.meta(spec))
    facts.meta["tuned"] = source  # the answer file make bench measured, None: declared
    if block.warmup:
        facts.meta["warmup_start"] = True
    # RUNTIME=docker: the image and limits, in every record of the block (failed ones too).
    container_facts = getattr(h.site, "container_facts", None)
    if container_facts is not None:
        facts.container = container_facts(spec.id, opts.python)
    runs = block.runs
    if spec.scenarios is not None:
        skipped = tuple(r for r in runs if r.scenario not in spec.scenarios)
        reason = f"{spec.id} serves only {', '.join(spec.scenarios)}"
        h.recorder.unsupported(opts, skipped, facts, reason, "scenario")
        runs = tuple(r for r in runs if r not in skipped)
        if not runs:
            return facts, ()
    runs = carried_runs(h, opts, runs, spec, facts)
    if not runs:
        return facts, ()
    if not spec.speaks(opts.protocol):
        reason = f"{opts.protocol} not served by the server: {spec.why_not(opts.protocol)}"
        h.recorder.unsupported(opts, runs, facts, reason, "protocol")
        return facts, ()
    if opts.lifecycle == "reload" and spec.reload_signal is None:
        reason = f"reload not supported by the server: {spec.reload_why}"
        h.recorder.unsupported(opts, runs, facts, reason, "reload")
        return facts, ()
    if opts.recycle is not None:
        if spec.recycle_argv is None:
            reason = f"worker recycling not supported by the server: {spec.recycle_why}"
            h.recorder.unsupported(opts, runs, facts, reason, "recycle")
            return facts, ()
        facts.knobs |= {"max_requests": opts.recycle, "max_requests_jitter": jitter(opts.recycle)}
    return facts, runs


def carried_runs(
    h: Harness,
    opts: plan.Options,
    runs: tuple[plan.RunSpec, ...],
    spec: ServerSpec,
    facts: ServerFacts,
) -> tuple[plan.RunSpec, ...]:
    """The runs whose scenario's own protocol (websocket) the server carries, directly over
    HTTP/1.1 in clear text; the others recorded unsupported with the server.toml's reason (or
    the PROTOCOL= or PROXY= it cannot be measured with)."""
    kept = []
    for run in runs:
        carried = SCENARIOS[run.scenario].protocol if run.scenario in SCENARIOS else None
        if carried is None:
            kept.append(run)
        elif not spec.speaks(carried):
            reason = f"{carried} not served by the server: {spec.why_not(carried)}"
            h.recorder.unsupported(opts, (run,), facts, reason, "protocol")
        elif opts.protocol != HTTP1 or opts.proxy is not None:
            # proxy/'s nginx templates pass no Upgrade header: the upgrade would never arrive.
            how = f"PROXY={opts.proxy}" if opts.proxy else f"PROTOCOL={opts.protocol}"
            reason = f"{carried} is measured directly over an HTTP/1.1 upgrade, not with {how}"
            h.recorder.unsupported(opts, (run,), facts, reason, "protocol")
        else:
            kept.append(run)
    return tuple(kept)


def measure_block(
    h: Harness, opts: plan.Options, block: plan.Block, spec: ServerSpec, env: Environment
) -> None:
    """Start one server, verify it, measure every run of the block against it, stop it."""
    started = start_session(h, opts, block, spec, env)
    if started is None:
        return
    session, runs = started
    try:
        if opts.mode.objective is not None:
            search_capacity(session, runs, block.trial, h.knees)
        else:
            session.measure_all(runs)
    except BlockVoid as exc:
        if h.site.problem():
            raise StackDied(str(exc)) from None
    finally:
        h.site.stop(session.served)


def start_session(
    h: Harness, opts: plan.Options, block: plan.Block, spec: ServerSpec, env: Environment
) -> tuple[Session, tuple[plan.RunSpec, ...]] | None:
    """Start the block's server and verify it: its Session and the runs it can serve; None
    when it serves none of them or did not start (recorded unsupported or failed)."""
    facts, runs = block_facts(h, opts, block, spec, env)
    if not runs:
        return None
    start = "warm-up start" if block.warmup else f"trial {block.trial}"
    h.progress.say(f"{block.server} {start}: starting {facts.knobs}")
    try:
        served = h.site.serve(spec, facts.knobs, env, opts, f"{block.server}-t{block.trial}.log")
    except (KeyboardInterrupt, Interrupted) as exc:
        # The block's runs were to be measured: recorded as failed, then the interrupt goes on.
        what = f"{block.server} {start} (starting the server)"
        h.recorder.failed(opts, runs, facts, f"interrupted by {signal_name(exc)} while {what}", {})
        exc.add_note(what)
        raise
    except ServeError as exc:
        if exc.argv is not None:
            facts.meta["argv"] = exc.argv
        if facts.container is not None and exc.container:
            facts.container |= exc.container
        h.recorder.failed(opts, runs, facts, str(exc), exc.logs)
        return None
    if served.argv is not None:
        facts.meta["argv"] = served.argv
    facts.verification = served.verification
    facts.backlog = served.backlog
    facts.interpreter = served.interpreter()  # right after verification
    if facts.container is not None and hasattr(served, "facts"):
        facts.container |= served.facts()
    return Session(h, opts, facts, served), runs


def open_arms(
    h: Harness, plans: list[tuple[plan.Options, list[plan.Block]]], specs: dict[str, ServerSpec]
) -> dict[str, Environment | Unavailable] | None:
    """Prepare every server's environment and the load tool, start the shared stack (None:
    it did not start, every planned run recorded as failed), check APP= first."""
    prepared = prepare_arms(h, plans, specs)
    h.progress.say(f"{h.tool.name}: preparing")
    try:
        h.tool.prepare(h.run_dir / "venv.log")
    except LoadError as exc:
        prepared = {s: Unavailable(str(exc), logs=("venv.log",)) for s in prepared}
    h.recorder.emulator = h.site.emulator
    try:
        h.progress.say("starting the shared stack")
        h.site.open()
    except ServeError as exc:
        for opts, blocks in plans:
            for block in blocks:
                facts = ServerFacts(specs[block.server].app)
                h.recorder.failed(opts, block.runs, facts, str(exc), exc.logs)
        return None
    if plans[0][0].app is not None:
        preflight_app(h, plans[0][0], specs, prepared)
    return prepared


def prepare_arms(
    h: Harness, plans: list[tuple[plan.Options, list[plan.Block]]], specs: dict[str, ServerSpec]
) -> dict[str, Environment | Unavailable]:
    """Every server's environment on each interpreter an arm asks for (PYTHON=: a study's
    arms may differ), keyed by the venv's name (bench.host.venv.venv_name)."""
    wanted = dict.fromkeys((s, opts.python) for opts, _ in plans for s in opts.servers)
    prepared: dict[str, Environment | Unavailable] = {}
    for python in dict.fromkeys(p for _, p in wanted):
        chosen = [specs[s] for s, p in wanted if p == python]
        on = (python,) if python is not None else ()  # the usual call where PYTHON is unset
        prepared |= h.site.prepare(chosen, plans[0][0].arch, h.progress.say, *on)
    return prepared


def env_of(
    prepared: dict[str, Environment | Unavailable], opts: plan.Options, server: str
) -> Environment | Unavailable:
    """The environment a block of `opts` runs `server` in (its venv on opts.python)."""
    return prepared[venv_name(server, opts.python)]


def run_blocks(
    h: Harness,
    arm_blocks: list[tuple[plan.Options, plan.Block]],
    specs: dict[str, ServerSpec],
    prepared: dict[str, Environment | Unavailable],
) -> str | None:
    """Every block in order, the host's speed probed between rounds; returns why the stack
    died (None: it lived)."""
    stack_reason: str | None = None
    done: set[int] = set()  # blocks run as part of a sliced round
    for number, (opts, block) in enumerate(arm_blocks):
        spec = specs[block.server]
        env = env_of(prepared, opts, block.server)
        if number in done:
            continue
        if number == 0 or block.trial != arm_blocks[number - 1][1].trial:
            between_rounds(h)
        if stack_reason is not None:
            # The stack died earlier: every remaining run is recorded, none measured.
            h.recorder.failed(opts, block.runs, ServerFacts(spec.app), stack_reason, {})
        elif plan.sliced(opts) and not block.warmup:
            # a race round: its servers started together and loaded in slices
            together = [
                i for i, (o, b) in enumerate(arm_blocks) if o is opts and b.trial == block.trial
            ]
            done.update(together)
            blocks = [arm_blocks[i][1] for i in together]
            stack_reason = run_sliced(h, opts, blocks, specs, prepared)
        elif isinstance(env, Unavailable):
            unavailable(h, opts, block, spec, env)
        else:
            try:
                measure_block(h, opts, block, spec, env)
            except StackDied as exc:
                stack_reason = f"not measured: {exc}"
                left = len(arm_blocks) - number - 1
                print(
                    f"bench: {exc}; the remaining {left} server start(s) are recorded as failed",
                    file=sys.stderr,
                )
    return stack_reason


def between_rounds(h: Harness) -> None:
    """A round begins: the host's speed probed again (bench.host.speed; at most once a
    minute), said when it drifted beyond tolerance of the session's start."""
    speed.checkpoint(h.progress.say, spaced=True)


def unavailable(
    h: Harness, opts: plan.Options, block: plan.Block, spec: ServerSpec, env: Unavailable
) -> None:
    """A block whose server could not be prepared: its runs recorded unsupported (emulation)
    or failed with the preparation's logs."""
    if env.status == "unsupported":
        h.recorder.unsupported(opts, block.runs, ServerFacts(spec.app), env.reason, "emulation")
        return
    logs = {n: read_log(h.run_dir / n) for n in env.logs if (h.run_dir / n).exists()}
    h.recorder.failed(opts, block.runs, ServerFacts(spec.app), env.reason, logs)


def run_sliced(
    h: Harness,
    opts: plan.Options,
    blocks: list[plan.Block],
    specs: dict[str, ServerSpec],
    prepared: dict[str, Environment | Unavailable],
) -> str | None:
    """One race round (bench.harness.slices): the servers that could be prepared started
    together and loaded in slices; returns why the stack died (None: it lived)."""
    between_rounds(h)
    ready = []
    for block in blocks:
        env = env_of(prepared, opts, block.server)
        if isinstance(env, Unavailable):
            unavailable(h, opts, block, specs[block.server], env)
        else:
            ready.append(block)

    def start(block: plan.Block) -> slices.Started | None:
        env = env_of(prepared, opts, block.server)
        assert not isinstance(env, Unavailable)
        return start_session(h, opts, block, specs[block.server], env)

    return slices.measure_round(ready, start, lambda s: h.site.stop(s.served), h.site.problem)


def more_rounds(
    h: Harness,
    opts: plan.Options,
    specs: dict[str, ServerSpec],
    prepared: dict[str, Environment | Unavailable],
    started: float,
) -> str:
    """TRIALS=auto: after the first opts.trials rounds, one more round at a time (servers
    shuffled as in the plan) until bench.report.precision says stop; returns why it stopped."""
    assert opts.precision is not None
    rounds = plan.rounds(opts)
    for _ in range(opts.trials):
        next(rounds)  # the rounds of the first plan, already run
    done = opts.trials
    while True:
        elapsed = clock() - started
        figures = precision.point_figures(h.recorder.records)
        stop = precision.next_round(done, figures, elapsed, elapsed / done, opts.precision)
        if stop is not None:
            met = sum(precision.reached(v, opts.precision.target) for v in figures.values())
            h.progress.say(
                f"TRIALS=auto: stopped on {stop} after {done} trial(s), {elapsed / 60:.1f} min: "
                f"{met} of {len(figures)} point(s) within ±{opts.precision.target:.0%}"
            )
            return stop
        blocks = next(rounds)
        if run_blocks(h, [(opts, b) for b in blocks], specs, prepared) is not None:
            return "stack"
        done += 1


def run_arms(
    h: Harness,
    plans: list[tuple[plan.Options, list[plan.Block]]],
    specs: dict[str, ServerSpec],
    race: racing.StudyJudge | None = None,
) -> int:
    """Prepare, start the shared stack, then every block of every arm in order (TRIALS=auto:
    then more rounds until precise or out of budget; a study's arms with `race`: rounds until
    its checks are decided)."""
    prepared = open_arms(h, plans, specs)
    if prepared is None:
        return 1
    # The budget counts the measuring rounds, not installing the servers' environments.
    started = clock()
    arm_blocks = interleave(plans)
    stack_reason = run_blocks(h, arm_blocks, specs, prepared)
    first = plans[0][0]
    if first.precision is not None and stack_reason is None:
        if race is not None:
            study_rounds(h, [o for o, _ in plans], specs, prepared, (started, race))
        elif len(first.servers) > 1:
            race_rounds(h, first, specs, prepared, started)
        else:
            more_rounds(h, first, specs, prepared, started)
    return 1 if h.recorder.failures else 0


def race_rounds(
    h: Harness,
    opts: plan.Options,
    specs: dict[str, ServerSpec],
    prepared: dict[str, Environment | Unavailable],
    started: float,
) -> racing.Outcome:
    """TRIALS=auto with several servers: rounds of those still racing until every adjacent
    pair is decided or the budget ends (bench.harness.racing); the closing lines are said and
    kept for the end of the output."""

    def run_round(blocks: list[plan.Block]) -> bool:
        if plan.sliced(opts):
            return run_sliced(h, opts, blocks, specs, prepared) is None
        return run_blocks(h, [(opts, b) for b in blocks], specs, prepared) is None

    outcome = racing.race(
        opts, lambda: h.recorder.records, run_round, h.progress.say, lambda: clock() - started
    )
    h.progress.say(racing.stop_line(outcome, clock() - started))
    h.closing.extend(outcome.lines)
    return outcome


def study_rounds(
    h: Harness,
    arms: list[plan.Options],
    specs: dict[str, ServerSpec],
    prepared: dict[str, Environment | Unavailable],
    race: tuple[float, racing.StudyJudge],
) -> racing.Outcome:
    """make study TRIALS=auto: rounds of the arms its undecided checks compare, until every
    check is decided or the budget ends (bench.harness.racing.race_arms); the closing line
    per check is said and kept for the end of the output."""
    started, judge = race

    def run_round(blocks: list[tuple[plan.Options, plan.Block]]) -> bool:
        return run_blocks(h, blocks, specs, prepared) is None

    outcome = racing.race_arms(
        arms,
        judge,
        lambda: h.recorder.records,
        run_round,
        h.progress.say,
        lambda: clock() - started,
    )
    h.progress.say(racing.stop_line(outcome, clock() - started, "study race"))
    h.closing.extend(outcome.lines)
    return outcome


def interleave(
    plans: list[tuple[plan.Options, list[plan.Block]]],
) -> list[tuple[plan.Options, plan.Block]]:
    """A study's arms interleaved in rounds: trial 1 of every arm (the arms in a seeded random
    order), then trial 2, and so on, so that the machine's drift over the study falls on every
    arm alike instead of on whichever arm ran last. One arm: its plan as it is."""
    if len(plans) == 1:
        opts, blocks = plans[0]
        return [(opts, block) for block in blocks]
    rng = random.Random(plans[0][0].seed)
    trials = sorted({block.trial for _, blocks in plans for block in blocks})
    out = []
    for trial in trials:
        arms = [(opts, [b for b in blocks if b.trial == trial]) for opts, blocks in plans]
        rng.shuffle(arms)
        out.extend((opts, block) for opts, blocks in arms for block in blocks)
    return out


def make_harness(
    first: plan.Options,
    arms: list[plan.Options],
    table: ProcessTable,
    run_dir: Path,
    progress: Progress,
) -> Harness:
    """The real site (here, or TARGET=) and the load tool the options chose."""
    placement = cpu_placement(first.pin)
    tool = load_tool(first.load_tool, first.load_threads, first.load_workers)
    site: Site = (
        RemoteSite(first.target)
        if first.target is not None
        else LocalSite(table, run_dir, placement, app=first.app)
    )
    if first.mode.runtime == "docker":
        from bench.host.docker import Limits
        from bench.stack.containers import ContainerSite

        limits = Limits(first.cpus, first.memory_bytes)
        site = ContainerSite(table, run_dir, placement, limits, first.network)
    proxy_version = tool_version(["nginx", "-v"]) if any(o.proxy for o in arms) else None
    recorder = Recorder(host_metadata(), placement, tool, progress, proxy_version)
    return Harness(site, tool, recorder, table, run_dir, progress)


HarnessFactory = Callable[[plan.Options, list[plan.Options], ProcessTable, Path, Progress], Harness]


def execute(
    options: plan.Options | Sequence[plan.Options],
    sections: Callable[[list[record.Record]], list[str]] | None = None,
    harness: HarnessFactory = make_harness,
    race: racing.StudyJudge | None = None,
) -> int:
    """Run the whole plan; write records and summary.md; return the exit status.

    Several Options (a study's arms) share one stack and one run directory; `sections` adds
    sections to the summary (the studies'); `harness` builds the site and load tool (the
    tests pass fakes); `race`: a study's judge, its arms raced after their first rounds
    (make study TRIALS=auto)."""
    arms = [options] if isinstance(options, plan.Options) else list(options)
    arms = [racing.with_looks(opts) for opts in arms]
    plans = plan.arm_plans(arms)
    first = arms[0]
    searches = [(o, b) for o, b in plans if o.mode.objective is not None]
    auto = first.precision
    progress = Progress(
        None if searches or auto else sum(len(b.runs) for _, blocks in plans for b in blocks),
        auto.budget_s
        if auto is not None
        else sum(
            plan.estimate_seconds(opts, blocks)
            if opts.mode.objective is None
            else opts.mode.objective.budget_s * sum(len(b.runs) for b in blocks)
            for opts, blocks in plans
        ),
    )

    closing: list[str] = []

    def body(table: ProcessTable, run_dir: Path) -> int:
        h = harness(first, arms, table, run_dir, progress)
        h.closing = closing
        try:
            return run_arms(h, plans, load_all(), race)
        except (KeyboardInterrupt, Interrupted) as exc:
            if not getattr(exc, "__notes__", None):  # not inside a run: the stage it was in
                exc.add_note(progress.last or "preparing the servers")
            raise

    # WAIT=0: refuse at once when another harness measures
    wait = first.wait
    status = interruptible(
        lambda: guarded(first.results, sections, body, f"seed {first.seed}", wait)
    )
    for line in closing:  # the race's verdicts end the output, after the summary's path
        print(line, file=sys.stderr)
    return status


def signal_name(exc: BaseException) -> str:
    """The signal behind an interrupt: Interrupted carries its name, KeyboardInterrupt none."""
    return str(exc) or "SIGINT"


def interruptible(main: Callable[[], int], who: str = "bench") -> int:
    """What make bench, capacity, soak and study measure, with Ctrl-C and SIGTERM handled
    throughout, also where SIGINT arrived ignored (a background job): inside a run `supervised`
    stops and records it; between runs nothing is running. 130 when interrupted."""
    try:
        with signals_raise():
            return main()
    except (KeyboardInterrupt, Interrupted) as exc:
        print(f"{who}: interrupted by {signal_name(exc)}; no run was under way", file=sys.stderr)
        return 130


def _useless(run_dir: Path) -> bool:
    """A run directory with nothing to read in it: no file, or only empty ones and the
    per-run pgbouncer configuration (its password is of no use after the run)."""
    files = [p for p in run_dir.rglob("*") if p.is_file()]
    return all(p.stat().st_size == 0 or p.name in PER_RUN_FILES for p in files)


# What the stack writes into every run directory before any log: nothing to keep on its own.
PER_RUN_FILES = frozenset({"pgbouncer.ini", "userlist.txt"})


def record_files(results: Path) -> set[Path]:
    """The record files under RESULTS/records (what this invocation adds is what it wrote)."""
    return set((results / "records").glob("*.json"))


Body = Callable[[ProcessTable, Path], int]


def sayer(who: str) -> Callable[[str], None]:
    """One line on stderr, prefixed with the command's name."""
    return lambda line: print(f"{who}: {line}", file=sys.stderr, flush=True)


def end_probe(say: Callable[[str], None], status: int) -> int:
    """Everything stopped, the lock still held: the session's end probe (none after an
    interrupt, which it would only delay); an interrupt during it makes the status 130."""
    if status == 130:
        return status
    try:
        speed.checkpoint(say)
    except (KeyboardInterrupt, Interrupted) as exc:
        say(f"interrupted by {signal_name(exc)} during the host's speed probe")
        return 130
    return status


def supervised(
    body: Body, name: str, who: str = "bench", note: str = "", wait: bool = True
) -> int | None:
    """Run `body` the one way a harness invocation runs (make bench, every study arm, the
    namespace ones too, make overhead): under the machine's lock (waiting for another
    harness, or with wait=False refusing), in a run directory of its own (`name` in it),
    Ctrl-C and SIGTERM ending it with 130 and every process of `body`'s table stopped on
    every exit path, the host's speed probed at its start and end (bench.host.speed). Returns
    body's status (2: APP= was rejected before any load), None when another run holds the lock
    and wait is False."""
    base = state_base()
    run_dir = base / "runs" / run_dir_name(name)
    run_dir.mkdir(parents=True, exist_ok=True)
    status, say = 0, sayer(who)
    try:
        with signals_raise(), machine_lock(wait, say):
            table = ProcessTable()
            print(f"{who}: run directory {run_dir}{', ' + note if note else ''}", file=sys.stderr)
            busy = busy_now(0.5)
            if busy.marked:  # said, not refused: each run under foreign load is marked anyway
                print(
                    f"{who}: this machine is busy: {busy.describe()} used by others",
                    file=sys.stderr,
                )
            try:
                speed.checkpoint(say, spaced=True)  # the start (a study's next batch: between)
                status = body(table, run_dir)
            except AppRejected as exc:
                # APP= failed before any load: bad input, one line (then the log's tail).
                print(f"{who}: APP rejected: {exc}", file=sys.stderr)
                for log, text in exc.logs.items():
                    tail = "\n".join(text.strip().splitlines()[-15:])
                    print(f"--- {log} (last lines)\n{tail}", file=sys.stderr)
                status = 2
            except (KeyboardInterrupt, Interrupted) as exc:
                cut = "; ".join(getattr(exc, "__notes__", ())) or "the set-up before any run"
                print(
                    f"{who}: interrupted by {signal_name(exc)}; cut short: {cut}; stopping "
                    "everything",
                    file=sys.stderr,
                )
                status = 130
            finally:
                # A second Ctrl-C must not cut the clean-up short and leave servers behind.
                with signals_ignored():
                    table.stop_all()
                    if _useless(run_dir):
                        shutil.rmtree(run_dir, ignore_errors=True)
            status = end_probe(say, status)
    except LockedError as exc:
        print(f"{who}: {exc}; WAIT=1 waits for it", file=sys.stderr)
        with contextlib.suppress(OSError):
            run_dir.rmdir()  # made for this run, which never started
        return None
    except (KeyboardInterrupt, Interrupted) as exc:  # while waiting for the lock: nothing ran
        print(f"{who}: interrupted by {signal_name(exc)} while waiting", file=sys.stderr)
        with contextlib.suppress(OSError):
            run_dir.rmdir()
        return 130
    return status


def guarded(
    results: Path,
    sections: Callable[[list[record.Record]], list[str]] | None,
    body: Body,
    note: str = "",
    wait: bool = True,
) -> int:
    """A measuring invocation: `body` supervised (above), then summary.md rebuilt unless the
    lock was held (wait=False: 2, bad timing is refused like bad input), the input rejected
    or no record written (an interrupt before the first run, or while waiting for the lock,
    must not replace the user's summary with an empty one). Returns body's status."""
    before = record_files(results)
    status = supervised(body, str(os.getpid()), note=note, wait=wait)
    if status is None:
        return 2
    if status == 2:
        return status  # nothing was measured: the summary stays as it was
    if not record_files(results) - before:
        print(f"bench: no record written; {results / 'summary.md'} left as it was", file=sys.stderr)
        return status
    summary = report.write_summary(results, sections)
    print(f"bench: wrote {summary}", file=sys.stderr)
    return status
