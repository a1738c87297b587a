"""One harness run: the plan's stages in order, every process stopped on every exit path.

Input: validated Options. Output: one record per planned run under RESULTS (ok, or failed
with its reason and logs), summary.md rebuilt, and the exit status (0 ok, 1 a run failed,
130 interrupted). Stages: venvs -> database + pgbouncer + upstream stub -> per (trial,
server): start, verify, then per scenario × concurrency: primer, warmup, measure, record.
"""

from __future__ import annotations

import fcntl
import os
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from bench import parse, plan, ready, record, report, sample
from bench.arch import (
    EmulationError,
    Emulator,
    ensure_emulator,
    ensure_site,
    host_arch,
    is_emulated,
    needs_emulation,
    site_packages,
)
from bench.load import (
    LOCUST_DIR,
    LoadAborted,
    LoadError,
    locust_version,
    run_locust,
    run_wrk,
    wrk_version,
)
from bench.metadata import host_metadata, now_iso, python_version
from bench.procs import (
    Interrupted,
    ProcessTable,
    StartError,
    process_tree,
    signals_ignored,
    signals_raise,
)
from bench.registry import ServerSpec, load_all, resolve_knobs
from bench.sample import Sampler
from bench.stack import Database, RunningProxy, RunningServer, Stack, state_base
from bench.venv import (
    VenvError,
    ensure_venv,
    installed_packages,
    make_venv,
    tool_version,
    uv_path,
)
from bench.verify import VerifyError, verify_server, verify_static

FRAMEWORKS = {"wsgi": "flask", "asgi": "quart", "static": None}


class LockedError(RuntimeError):
    """Another harness run holds the lock."""


@contextmanager
def run_lock(base: Path) -> Iterator[None]:
    """One harness run per checkout at a time. flock dies with its holder: no stale locks."""
    path = base / "bench.lock"
    with open(path, "a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            holder = fh.read().strip() or "another run"
            raise LockedError(f"another harness run is in progress ({holder})") from None
        fh.seek(0)
        fh.truncate()
        fh.write(f"pid {os.getpid()} since {now_iso()}\n")
        fh.flush()
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@dataclass
class Progress:
    """A line per stage on stderr: what runs now and roughly how long is left."""

    total_runs: int
    remaining_s: int
    done: int = 0
    started: float = field(default_factory=time.monotonic)

    def say(self, text: str) -> None:
        """Print one progress line."""
        mins, secs = divmod(max(0, self.remaining_s), 60)
        print(
            f"[{self.done:>3}/{self.total_runs}] {text} (~{mins}m{secs:02d}s of load left)",
            file=sys.stderr,
            flush=True,
        )


@dataclass(frozen=True)
class Placement:
    """Which CPUs the server side and the load tool may use (PIN=1 separates them)."""

    pinned: bool
    server_cpus: frozenset[int]
    load_cpus: frozenset[int]

    def to_dict(self) -> dict[str, object]:
        """The record's metadata.cpu_placement."""
        return {
            "pinned": self.pinned,
            "server_cpus": sorted(self.server_cpus),
            "load_cpus": sorted(self.load_cpus),
        }


def cpu_placement(pin: bool) -> Placement:
    """All usable CPUs for everyone, or (PIN=1) the first half for the server and its proxy,
    the rest for the load tool. PostgreSQL, pgbouncer and the stub are not pinned."""
    cpus = sorted(os.sched_getaffinity(0))
    if not pin or len(cpus) < 2:
        return Placement(False, frozenset(cpus), frozenset(cpus))
    half = (len(cpus) + 1) // 2
    return Placement(True, frozenset(cpus[:half]), frozenset(cpus[half:]))


@dataclass
class Context:
    """What every run of one harness invocation shares."""

    options: plan.Options
    table: ProcessTable
    run_dir: Path
    host: dict[str, object]
    progress: Progress
    wrk_version: str | None
    placement: Placement = field(default_factory=lambda: cpu_placement(False))
    emulator: Emulator | None = None  # ARCH=arm64 on an amd64 host
    locust_python: Path | None = None
    locust_version: str | None = None
    proxy_version: str | None = None
    failures: int = 0
    stack: Stack | None = None
    db: Database | None = None


def _record(
    ctx: Context,
    run: plan.RunSpec,
    spec: ServerSpec | None,
    *,
    status: str,
    reason: str | None,
    knobs: dict[str, int],
    server_meta: dict[str, object],
    raw: dict[str, str],
    result: parse.WrkResult | None = None,
    db_delta: dict[str, int] | None = None,
    verification: dict | None = None,
    started: str | None = None,
    resources: dict | None = None,
    sockets: dict | None = None,
    backlog: int | None = None,
    proxy_by_status: dict[int, int] | None = None,
    tasks: dict | None = None,
) -> Path:
    app = spec.app if spec else "wsgi"
    opts = ctx.options
    if resources and ctx.emulator is not None:
        # Under qemu the tree's memory is the emulator's, not the server's: kept apart.
        resources = {**resources, "server_rss_mb": None, "qemu_rss_mb": resources["server_rss_mb"]}
    errors = None
    if result:
        errors = {**result.errors, "by_status": {str(k): v for k, v in result.by_status.items()}}
        if proxy_by_status is not None:
            errors["proxy_by_status"] = {str(k): v for k, v in sorted(proxy_by_status.items())}
    rec = record.Record(
        format_version=record.FORMAT_VERSION,
        status=status,
        reason=reason,
        run_id=uuid.uuid4().hex,
        server=run.server,
        app=app,
        app_framework=FRAMEWORKS.get(app),
        scenario=run.scenario,
        path=run.path,
        concurrency=run.concurrency,
        trial=run.trial,
        duration_s=float(ctx.options.duration_s),
        arch=ctx.options.arch,
        host_arch=host_arch(),
        emulated=ctx.options.arch != host_arch(),
        load_tool=opts.load_tool,
        load_tool_version=ctx.locust_version if opts.load_tool == "locust" else ctx.wrk_version,
        load_threads=(min(opts.load_threads, run.concurrency) if opts.load_tool == "wrk" else None),
        knobs=knobs,
        requests=result.requests if result else None,
        rps=result.rps if result else None,
        latency_ms=dict(result.latency_ms) if result else None,
        errors=errors,
        db=db_delta,
        verify=verification,
        metadata={
            **ctx.host,
            **server_meta,
            "started_at": started or now_iso(),
            "ended_at": now_iso(),
            "seed": ctx.options.seed,
            "cpu_placement": ctx.placement.to_dict(),
            "runtime": opts.runtime,
            **opts.meta,
            **({"proxy_version": ctx.proxy_version} if opts.proxy else {}),
            **({"emulator": ctx.emulator.metadata()} if ctx.emulator else {}),
        },
        raw_files=[],
        resources=resources,
        sockets=sockets,
        proxy=opts.proxy,
        keepalive={"client": opts.keepalive, "upstream": opts.upstream_keepalive},
        backlog=backlog,
        load_workers=opts.load_workers if opts.load_tool == "locust" else None,
        target=opts.target,
        tasks=tasks,
    )
    if status == "failed":  # unsupported is a fact about the server, not a failed run
        ctx.failures += 1
    return record.write_record(ctx.options.results, rec, raw)


def _fail_runs(
    ctx: Context,
    runs: tuple[plan.RunSpec, ...],
    spec: ServerSpec | None,
    reason: str,
    knobs: dict[str, int],
    server_meta: dict[str, object],
    logs: dict[str, str],
) -> None:
    """A failed record for each run that could not be measured, with the logs that say why."""
    for run in runs:
        _record(
            ctx,
            run,
            spec,
            status="failed",
            reason=reason,
            knobs=knobs,
            server_meta=server_meta,
            raw=logs,
        )
        ctx.progress.done += 1
    print(f"  FAILED {runs[0].server}: {reason}", file=sys.stderr, flush=True)


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def _db_delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {
        "queries": after.get("total_query_count", 0) - before.get("total_query_count", 0),
        "transactions": after.get("total_xact_count", 0) - before.get("total_xact_count", 0),
    }


def wait_idle(server: RunningServer, timeout_s: float = 60.0) -> None:
    """Wait until the requests a finished wrk left behind are served.

    When wrk stops, connections still queued for accept() carry requests already sent; a
    sync server serves every one of them (for /upstream at c=50, seconds of work) and that
    work would land in the next measured window. Wait for an empty accept queue, then for
    the server to answer.
    """
    ready.wait_until(
        lambda: (sample.listen_queue(server.port) or 0) == 0,
        "draining its accept queue",
        server.proc,
        timeout_s,
    )
    ready.wait_http(server.proc, server.port, server.spec.ready_path, timeout_s)


class StackDied(RuntimeError):
    """PostgreSQL or pgbouncer died: no later run can be measured."""


def stack_problem(ctx: Context) -> str | None:
    """Why the shared stack cannot serve any more, or None while it is healthy."""
    assert ctx.db is not None
    for proc in (ctx.db.pg, ctx.db.pgbouncer):
        code = proc.exit_code()
        if code is not None:
            return f"{proc.name} exited with code {code} during the run"
    return None


def server_problem(server: RunningServer, pids: set[int]) -> str | None:
    """Why the server's measurement is void (it or a worker died), or None."""
    code = server.proc.exit_code()
    if code is not None:
        return f"server exited with code {code} during load"
    gone = sorted(pid for pid in pids if not psutil.pid_exists(pid))
    if gone:
        return f"server process(es) {gone} died during load"
    return None


@dataclass(frozen=True)
class Measured:
    """What one measured load run produced, before parsing."""

    text: str
    db_delta: dict[str, int] | None
    started: str
    resources: dict | None = None
    sockets: dict | None = None
    proxy_by_status: dict[int, int] | None = None
    result: parse.WrkResult | None = None  # already parsed (Locust's CSV, not wrk's text)
    tasks: dict | None = None


def _log_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _log_since(path: Path, offset: int) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(offset)
            return fh.read().decode(errors="replace")
    except OSError:
        return ""


def measure_run(
    ctx: Context,
    server: RunningServer,
    proxy: RunningProxy | None,
    run: plan.RunSpec,
    primed: set[str],
) -> Measured:
    """Primer (first run of a scenario), warmup, drain, then the measured wrk run.

    Returns the wrk text, pgbouncer deltas and samples; raises LoadAborted when the watchdog
    sees the server or the stack break, LoadError when wrk itself fails.
    """
    assert ctx.db is not None
    opts = ctx.options
    front = proxy.port if proxy else server.port
    url = f"http://127.0.0.1:{front}{run.path}"
    raw = ctx.run_dir / f"{run.server}-{run.scenario}-c{run.concurrency}-t{run.trial}"
    pids = process_tree(server.proc.pid)
    # KEEPALIVE=off: every request on a new connection, closed after the response.
    headers = () if opts.keepalive else ("Connection: close",)
    cpus = ctx.placement.load_cpus if ctx.placement.pinned else None

    def watch() -> str | None:
        problem = stack_problem(ctx) or server_problem(server, pids)
        if problem is None and proxy is not None and proxy.proc.exit_code() is not None:
            problem = f"nginx (proxy) exited with code {proxy.proc.exit_code()} during load"
        return problem

    def load(concurrency: int, seconds: float, out: Path, sampler: Sampler | None = None) -> str:
        return run_wrk(
            ctx.table,
            url,
            concurrency,
            seconds,
            opts.load_threads,
            out,
            headers=headers,
            watch=watch,
            sampler=sampler,
            cpus=cpus,
            timeout_s=opts.load_timeout_s,
        )

    # Locust's users start cold, as the paper's did: no primer, no warmup.
    if run.scenario not in primed and opts.load_tool == "wrk":
        load(plan.PRIMER_CONCURRENCY, plan.PRIMER_S, raw.with_suffix(".primer.txt"))
        primed.add(run.scenario)
    if opts.warmup_s and opts.load_tool == "wrk":
        load(run.concurrency, opts.warmup_s, raw.with_suffix(".warmup.txt"))
    wait_idle(server)
    before = ctx.db.pgbouncer_stats()
    log_offset = _log_size(proxy.access_log) if proxy else 0
    started = now_iso()
    sampler = Sampler(
        server.proc.pid,
        server.port,
        proxy_pid=proxy.proc.pid if proxy else None,
        proxy_port=proxy.port if proxy else None,
        pool_probe=ctx.db.pgbouncer_pools,
        db_port=ctx.db.pgbouncer_port,
    )
    window_start = time.time()
    result = tasks = None
    if opts.load_tool == "locust":
        assert ctx.locust_python is not None
        out = run_locust(
            ctx.table,
            ctx.locust_python,
            f"http://127.0.0.1:{front}",
            run.scenario,
            run.concurrency,
            opts.duration_s,
            opts.load_workers,
            raw.parent / f"{raw.name}-locust",
            watch=watch,
            sampler=sampler,
            cpus=cpus,
        )
        text = (out / "locust_stats.csv").read_text()
        status_file = out / "status.json"
        status = status_file.read_text() if status_file.exists() else None
        try:
            result = parse.parse_locust(text, status, opts.duration_s)
            tasks = parse.parse_locust_tasks(text)
        except parse.ParseError as exc:
            raise LoadError(f"unreadable Locust statistics: {exc}") from exc
    else:
        text = load(run.concurrency, opts.duration_s, raw.with_suffix(".wrk.txt"), sampler)
    # The server may die in the last half second: check once more after wrk.
    reason = watch()
    if reason is not None:
        raise LoadAborted(reason)
    proxy_by_status = None
    if proxy is not None:
        # Only what ended while wrk ran, by wrk's own clock: nginx goes on answering the
        # requests it holds (504s seconds later) after wrk has left.
        try:
            window_end = window_start + (result or parse.parse_wrk(text)).duration_s
        except parse.ParseError:
            window_end = window_start + opts.duration_s
        # nginx writes its log line when a request ends: give the last ones a moment.
        time.sleep(0.2)
        proxy_by_status = parse.parse_proxy_log(
            _log_since(proxy.access_log, log_offset), window_start, window_end
        )
    pools = sampler.pools()
    db = _db_delta(before, ctx.db.pgbouncer_stats())
    if pools:
        db |= {
            "server_conns_max": pools.get("sv_open", 0),
            "server_conns_active_max": pools.get("sv_active", 0),
            "clients_waiting_max": pools.get("cl_waiting", 0),
        }
    return Measured(
        text, db, started, sampler.resources(), sampler.sockets(), proxy_by_status, result, tasks
    )


def measure_block(
    ctx: Context,
    block: plan.Block,
    spec: ServerSpec,
    python: Path,
    packages: dict[str, str],
    server_env: dict[str, str] | None = None,
) -> None:
    """Start one server, verify it, and measure every run of the block against it."""
    assert ctx.stack is not None and ctx.db is not None
    opts = ctx.options
    server_cpus = ctx.placement.server_cpus if ctx.placement.pinned else None
    # "cpus" in a declaration means the CPUs this server may use (its half under PIN=1).
    knobs = resolve_knobs(spec, len(ctx.placement.server_cpus), opts.overrides)
    server_meta: dict[str, object] = {
        "packages": packages,
        "server_package": spec.package or spec.id,
        "server_version": packages.get(spec.package or spec.id),
        "python_version": (
            ctx.emulator.python_version
            if ctx.emulator
            else python_version(python)
            if spec.requirements
            else None
        ),
    }
    if spec.scenarios is not None:
        unsupported = tuple(r for r in block.runs if r.scenario not in spec.scenarios)
        for run in unsupported:
            _record(
                ctx,
                run,
                spec,
                status="unsupported",
                reason=f"{spec.id} serves only {', '.join(spec.scenarios)}",
                knobs=knobs,
                server_meta=server_meta,
                raw={},
            )
            ctx.progress.done += 1
        block = plan.Block(
            block.trial, block.server, tuple(r for r in block.runs if r not in unsupported)
        )
        if not block.runs:
            return
    log_name = f"{block.server}-t{block.trial}.log"
    log_path = ctx.run_dir / log_name
    ctx.progress.say(f"{block.server} trial {block.trial}: starting {knobs}")
    try:
        server: RunningServer = ctx.stack.start_server(
            spec,
            knobs,
            python,
            ctx.db,
            log_name,
            cpus=server_cpus,
            extra_env={**(server_env or {}), **opts.app_env},
        )
    except StartError as exc:
        reason = f"server did not start: {str(exc).splitlines()[0]}"
        _fail_runs(
            ctx, block.runs, spec, reason, knobs, server_meta, {"server.log": _read(log_path)}
        )
        return
    server_meta["argv"] = server.argv
    proxy: RunningProxy | None = None
    if ctx.emulator is not None and not is_emulated(server.proc.pid):
        ctx.stack.stop_server(server)
        _fail_runs(ctx, block.runs, spec, "not running under qemu", knobs, server_meta, {})
        return
    try:
        try:
            if spec.app == "static":
                verification = verify_static(server.port)
            else:
                verification = verify_server(server.port, ctx.db)
        except (VerifyError, OSError) as exc:
            _fail_runs(
                ctx,
                block.runs,
                spec,
                f"verification failed: {exc}",
                knobs,
                server_meta,
                {"server.log": _read(log_path)},
            )
            return
        verified = {"checked": verification.checked, "warnings": verification.warnings}
        backlog = sample.listen_backlog(server.port)
        if opts.proxy == "nginx":
            try:
                proxy = ctx.stack.start_proxy(
                    server, bool(opts.upstream_keepalive), opts.proxy_timeout_s, server_cpus
                )
            except StartError as exc:
                _fail_runs(
                    ctx,
                    block.runs,
                    spec,
                    f"nginx (proxy) did not start: {str(exc).splitlines()[0]}",
                    knobs,
                    server_meta,
                    {"server.log": _read(log_path)},
                )
                return
        primed: set[str] = set()
        for index, run in enumerate(block.runs):
            step = plan.run_seconds(opts, run.scenario in primed)
            ctx.progress.say(
                f"{run.server} {run.scenario} c={run.concurrency} trial {run.trial}/{opts.trials}: "
                f"{step} s"
            )
            try:
                measured = measure_run(ctx, server, proxy, run, primed)
            except LoadAborted as exc:
                # Everything from here on in this block is void; the stack may be too.
                logs = {"server.log": _read(log_path)}
                if ctx.db.pg.exit_code() is not None or ctx.db.pgbouncer.exit_code() is not None:
                    logs |= {
                        f"{n}.log": _read(ctx.run_dir / f"{n}.log")
                        for n in ("postgres", "pgbouncer")
                    }
                _fail_runs(ctx, block.runs[index:], spec, str(exc), knobs, server_meta, logs)
                if stack_problem(ctx):
                    raise StackDied(str(exc)) from None
                return
            except (KeyboardInterrupt, Interrupted) as exc:
                name = str(exc) or "SIGINT"
                _fail_runs(
                    ctx,
                    (run,),
                    spec,
                    f"interrupted by {name} during load",
                    knobs,
                    server_meta,
                    {"server.log": _read(log_path)},
                )
                raise
            except (LoadError, RuntimeError) as exc:
                measured = Measured("", None, now_iso())
                load_error: str | None = str(exc)
            else:
                load_error = None
            ctx.progress.remaining_s -= step
            result = measured.result
            if load_error is None and result is None:
                try:
                    result = parse.parse_wrk(measured.text)
                except parse.ParseError as exc:
                    load_error = f"unreadable wrk output: {exc}"
            if result is not None and result.requests == 0:
                load_error = "no request completed"
            path = _record(
                ctx,
                run,
                spec,
                status="ok" if load_error is None else "failed",
                reason=load_error,
                knobs=knobs,
                server_meta=server_meta,
                raw={
                    "locust_stats.csv" if opts.load_tool == "locust" else "wrk.txt": measured.text
                },
                result=result,
                tasks=measured.tasks,
                db_delta=measured.db_delta,
                verification=verified,
                started=measured.started,
                resources=measured.resources,
                sockets=measured.sockets,
                backlog=backlog,
                proxy_by_status=measured.proxy_by_status,
            )
            ctx.progress.done += 1
            if result is not None and result.latency_ms["p99"] is not None:
                print(
                    f"        {result.rps:>10,.0f} rps  p50 {result.latency_ms['p50']:.2f} ms  "
                    f"p99 {result.latency_ms['p99']:.2f} ms  -> {path.name}",
                    file=sys.stderr,
                    flush=True,
                )
    finally:
        if proxy is not None:
            ctx.table.stop(proxy.proc)
        ctx.stack.stop_server(server)


def execute(
    options: plan.Options | Sequence[plan.Options],
    sections: Callable[[list[record.Record]], list[str]] | None = None,
) -> int:
    """Run the whole plan; write records and summary.md; return the exit status.

    Several Options (a study's arms) share one stack and one run directory; `sections` adds
    sections to the summary (the studies')."""
    arms = [options] if isinstance(options, plan.Options) else list(options)
    plans = [(opts, plan.make_plan(opts)) for opts in arms]
    first = arms[0]
    specs = load_all()
    base = state_base()
    run_name = time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + f"-{os.getpid()}"
    run_dir = base / "runs" / run_name
    run_dir.mkdir(parents=True, exist_ok=True)
    total_runs = sum(len(b.runs) for _, blocks in plans for b in blocks)
    progress = Progress(
        total_runs, sum(plan.estimate_seconds(opts, blocks) for opts, blocks in plans)
    )
    status = 0
    try:
        with run_lock(base), signals_raise():
            table = ProcessTable()
            ctx = Context(
                first,
                table,
                run_dir,
                host_metadata(),
                progress,
                wrk_version(),
                placement=cpu_placement(first.pin),
                proxy_version=(
                    tool_version(["nginx", "-v"]) if any(o.proxy for o in arms) else None
                ),
            )
            print(f"bench: run directory {run_dir}, seed {first.seed}", file=sys.stderr)
            try:
                status = _execute(ctx, plans, specs)
            except (KeyboardInterrupt, Interrupted) as exc:
                print(
                    f"bench: interrupted ({exc or 'SIGINT'}): stopping everything", file=sys.stderr
                )
                status = 130
            finally:
                # A second Ctrl-C must not cut the clean-up short and leave servers behind.
                with signals_ignored():
                    table.stop_all()
    except LockedError as exc:
        print(f"bench: {exc}; wait for it to finish", file=sys.stderr)
        return 1
    summary = report.write_summary(first.results, sections)
    print(f"bench: wrote {summary}", file=sys.stderr)
    return status


def measure_target(ctx: Context, block: plan.Block, spec: ServerSpec) -> None:
    """TARGET=: verify the remote server, then load it; nothing else is started here, and
    the server-side samples (CPU, memory, accept queue) are absent from the records."""
    opts = ctx.options
    assert opts.target is not None
    host, port = opts.target.removeprefix("http://").rsplit(":", 1)
    knobs: dict[str, int] = {}
    meta: dict[str, object] = {"server_package": spec.package or spec.id}
    try:
        if spec.app == "static":
            verification = verify_static(int(port), host)
        else:
            verification = verify_server(int(port), None, host)
    except (VerifyError, OSError) as exc:
        _fail_runs(ctx, block.runs, spec, f"verification failed: {exc}", knobs, meta, {})
        return
    verified = {"checked": verification.checked, "warnings": verification.warnings}
    headers = () if opts.keepalive else ("Connection: close",)
    primed: set[str] = set()
    for run in block.runs:
        url = f"{opts.target}{run.path}"
        raw = ctx.run_dir / f"target-{run.scenario}-c{run.concurrency}-t{run.trial}"
        ctx.progress.say(f"{opts.target} {run.scenario} c={run.concurrency} trial {run.trial}")
        started = now_iso()
        text, result, error = "", None, None
        try:
            if run.scenario not in primed:
                run_wrk(
                    ctx.table,
                    url,
                    plan.PRIMER_CONCURRENCY,
                    plan.PRIMER_S,
                    opts.load_threads,
                    raw.with_suffix(".primer.txt"),
                    headers=headers,
                )
                primed.add(run.scenario)
            if opts.warmup_s:
                run_wrk(
                    ctx.table,
                    url,
                    run.concurrency,
                    opts.warmup_s,
                    opts.load_threads,
                    raw.with_suffix(".warmup.txt"),
                    headers=headers,
                )
            sampler = Sampler(None, None)
            text = run_wrk(
                ctx.table,
                url,
                run.concurrency,
                opts.duration_s,
                opts.load_threads,
                raw.with_suffix(".wrk.txt"),
                headers=headers,
                sampler=sampler,
                timeout_s=opts.load_timeout_s,
            )
            result = parse.parse_wrk(text)
        except (LoadError, parse.ParseError) as exc:
            error = str(exc)
            sampler = None
        if result is not None and result.requests == 0:
            error = "no request completed"
        _record(
            ctx,
            run,
            spec,
            status="ok" if error is None else "failed",
            reason=error,
            knobs=knobs,
            server_meta=meta,
            raw={"wrk.txt": text},
            result=result,
            verification=verified,
            started=started,
            resources=sampler.resources() if sampler else None,
            sockets=None,
        )
        ctx.progress.done += 1


def _execute(
    ctx: Context,
    plans: list[tuple[plan.Options, list[plan.Block]]],
    specs: dict[str, ServerSpec],
) -> int:
    if ctx.options.target is not None:
        for opts, blocks in plans:
            ctx.options = opts
            for block in blocks:
                measure_target(ctx, block, specs[block.server])
        return 1 if ctx.failures else 0
    stack_reason = ""
    pythons: dict[str, Path] = {}
    packages: dict[str, dict[str, str]] = {}
    venv_errors: dict[str, str] = {}
    unsupported: dict[str, str] = {}
    server_env: dict[str, dict[str, str]] = {}
    servers = list(dict.fromkeys(s for opts, _ in plans for s in opts.servers))
    if needs_emulation(ctx.options.arch):
        ctx.progress.say(f"preparing the {ctx.options.arch} interpreter under qemu")
        try:
            ctx.emulator = ensure_emulator(ctx.run_dir / "emulation.log")
        except EmulationError as exc:
            for server in servers:
                venv_errors[server] = f"emulation: {exc}"
    for server in servers:
        spec = specs[server]
        if server in venv_errors:
            continue
        if ctx.emulator is not None:
            if spec.requirements is None:
                unsupported[server] = f"{server} is not a Python server: nothing to emulate"
                continue
            ctx.progress.say(f"{server}: preparing its {ctx.options.arch} wheels")
            try:
                site = ensure_site(
                    ctx.emulator,
                    spec.id,
                    spec.requirements,
                    tuple(spec.install_flags),
                    uv_path(),
                    ctx.run_dir / "emulation.log",
                )
            except EmulationError as exc:
                venv_errors[server] = str(exc)
                continue
            pythons[server] = ctx.emulator.python
            packages[server] = site_packages(site)
            server_env[server] = ctx.emulator.env(site)
            continue
        if spec.requirements is None:
            # Not a Python server (nginx-static): no venv; its version comes from the tool.
            pythons[server] = Path(sys.executable)
            version = tool_version(spec.version_argv) if spec.version_argv else None
            packages[server] = {spec.id: version} if version else {}
            continue
        ctx.progress.say(f"{server}: preparing its venv")
        try:
            pythons[server] = ensure_venv(spec, ctx.run_dir / "venv.log")
            packages[server] = installed_packages(pythons[server])
        except VenvError as exc:
            venv_errors[server] = str(exc)
    if any(opts.load_tool == "locust" for opts, _ in plans):
        ctx.progress.say("Locust: preparing its venv")
        try:
            ctx.locust_python = make_venv(
                "_locust", LOCUST_DIR / "requirements.txt", log=ctx.run_dir / "venv.log"
            )
            ctx.locust_version = locust_version(ctx.locust_python)
        except VenvError as exc:
            for server in list(pythons):
                venv_errors[server] = f"Locust's venv: {exc}"
    ctx.stack = Stack(ctx.table, ctx.run_dir)
    try:
        ctx.progress.say("starting PostgreSQL, pgbouncer and the upstream stub")
        ctx.db = ctx.stack.start_database()
        ctx.stack.start_upstream(sys.executable)
    except StartError as exc:
        logs = {f"{n}.log": _read(ctx.run_dir / f"{n}.log") for n in ("postgres", "pgbouncer")}
        for opts, blocks in plans:
            ctx.options = opts
            for block in blocks:
                _fail_runs(
                    ctx,
                    block.runs,
                    specs[block.server],
                    f"stack did not start: {str(exc).splitlines()[0]}",
                    {},
                    {},
                    logs,
                )
        return 1
    arm_blocks = [(opts, block) for opts, blocks in plans for block in blocks]
    for number, (opts, block) in enumerate(arm_blocks):
        ctx.options = opts
        blocks = arm_blocks  # for the count of what remains
        spec = specs[block.server]
        if ctx.db is None:
            # The stack died earlier: every remaining run is recorded, none measured.
            _fail_runs(ctx, block.runs, spec, stack_reason, {}, {}, {})
            continue
        if block.server in unsupported:
            for run in block.runs:
                _record(
                    ctx,
                    run,
                    spec,
                    status="unsupported",
                    reason=unsupported[block.server],
                    knobs={},
                    server_meta={},
                    raw={},
                )
                ctx.progress.done += 1
            continue
        if block.server in venv_errors:
            logs = {
                name: _read(ctx.run_dir / name)
                for name in ("venv.log", "emulation.log")
                if (ctx.run_dir / name).exists()
            }
            _fail_runs(ctx, block.runs, spec, venv_errors[block.server], {}, {}, logs)
            continue
        try:
            measure_block(
                ctx,
                block,
                spec,
                pythons[block.server],
                packages[block.server],
                server_env.get(block.server),
            )
        except StackDied as exc:
            stack_reason = f"not measured: {exc}"
            print(
                f"bench: {exc}; the remaining {len(blocks) - number - 1} server start(s) "
                "are recorded as failed",
                file=sys.stderr,
            )
            ctx.db = None
    return 1 if ctx.failures else 0
