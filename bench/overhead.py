"""make overhead: what the harness's observation costs, as requests/s lost against bare wrk.

Input: servers, scenarios, one concurrency, the duration and the number of rounds (make
variables, parsed by bench/cli like every command's; defaults in bench/core/defaults.py);
LEGACY=1 adds the observer as it was before it was made cheap (`ss` started twice per 0.5 s
sample, a psql per pool sample, wrk's Lua response() on every run), rebuilt from the pieces
still in the code, so before and after are measured in the same minutes.
Output on stdout: per server and route and arm, the requests/s (median over the rounds), the
arm/bare ratio per round (median, min, max), and what the observer itself used while the
measured window ran: the harness process's CPU % (sampler thread, watchdog) and its children's
CPU per request (wrk, plus `ss`/`psql` where they are started), in µs, and both together as
the observer's share of one core ("obs %", beyond bare wrk's own); the raw wrk output in the
run directory. The stack and each server start once; each round runs the arms in turn
(bare `wrk -t<LOAD_THREADS> -c<c> -d<s>s`, then the harness's own measured point: warmup,
drain, samplers, watchdog, as make bench runs it), the order rotating per round so that drift
on a shared machine falls on every arm. A benchmark, not a test: nothing asserted, nothing
recorded under results/.
"""

from __future__ import annotations

import dataclasses
import resource
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from bench.core import plan
from bench.core.registry import load_all
from bench.harness.measure import Settings, measure_point
from bench.harness.run import supervised
from bench.host.placement import cpu_placement
from bench.host.prepare import Environment, Unavailable
from bench.host.procs import ProcessTable
from bench.load import LoadRequest, LoadResult, LoadTool
from bench.load.wrk import Wrk, run_bare
from bench.observe.sample import Family, Sampler, ss_listen, ss_time_wait
from bench.stack.site import LocalServed, LocalSite, ServeError


@dataclass(frozen=True)
class Cost:
    """One arm's measured window: its requests/s and what the observer used meanwhile."""

    rps: float
    self_cpu_pct: float  # the harness process (100 = one core)
    children_us_per_request: float  # wrk, and any ss/psql started meanwhile


def _usage() -> tuple[float, float, float]:
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime, time.monotonic()


def _cost(before: tuple[float, float, float], result: LoadResult) -> Cost:
    me, kids, now = _usage()
    elapsed = max(now - before[2], 1e-9)
    return Cost(
        result.rps,
        (me - before[0]) / elapsed * 100,
        (kids - before[1]) / max(result.requests, 1) * 1e6,
    )


@dataclass
class Accounted:
    """A load tool whose measured run (not primer, not warmup) is accounted for."""

    tool: LoadTool
    last: Cost | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.tool, name)

    def run(self, table: ProcessTable, request: LoadRequest, **kwargs: Any) -> LoadResult:
        """The tool's run; its Cost kept in `last` when it is the measured one."""
        before = _usage()
        result = self.tool.run(table, request, **kwargs)
        if request.out.name.endswith(".measure"):
            self.last = _cost(before, result)
        return result


@dataclass
class EveryTime(Family):
    """A process tree listed as before: psutil's scan of every /proc entry, at every sample."""

    def procs(self) -> list[psutil.Process]:
        """The root and psutil's descendants, listed now."""
        try:
            root = psutil.Process(self.pid)
            return [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []


@dataclass
class LegacySampler(Sampler):
    """Sampler with the process-tree listing of before."""

    def _family(self, pid: int) -> Family:
        return EveryTime(pid)


@dataclass
class Legacy:
    """The observer before it was made cheap: `ss` started twice per sample, a psql per pool
    sample, process trees scanned by psutil at every sample, and (as the old wrk_report.lua
    had no other mode) wrk counting every response by status, which measure_point asks for
    when a proxy's log is to be read."""

    served: LocalServed
    proxied: bool = True

    def __getattr__(self, name: str) -> Any:
        return getattr(self.served, name)

    @property
    def name(self) -> str:
        """Raw files apart from the current observer's."""
        return f"{self.served.name}-legacy"

    def sampler(self) -> Sampler:
        """The served sampler's settings with the old probes and tree listing."""
        current = self.served.sampler()
        given = {
            f.name: getattr(current, f.name)
            for f in dataclasses.fields(Sampler)
            if f.init and not f.name.startswith("_")
        }
        given |= {
            "pool_probe": self.served.db.pgbouncer_pools,
            "time_wait_probe": ss_time_wait,
            "listen_probe": ss_listen,
        }
        return LegacySampler(**given)


def bare_wrk(settings: Settings, served: LocalServed, run: plan.RunSpec, threads: int) -> Cost:
    """Plain wrk, no script, no sampler, no watchdog."""
    request = LoadRequest(
        base_url=served.base_url,
        path=run.path,
        scenario=run.scenario,
        concurrency=run.concurrency,
        duration_s=settings.duration_s,
        out=settings.run_dir / f"{served.name}-{run.scenario}-r{run.trial}",
        timeout_s=settings.timeout_s,
    )
    served.wait_idle()
    before = _usage()
    return _cost(before, run_bare(settings.table, request, threads))


HEADER = (
    f"{'server':<14} {'route':<10} {'arm':<8} {'req/s':>9} {'ratio':>6} {'min':>6} "
    f"{'max':>6} {'self %':>7} {'µs/req':>7} {'obs %':>6} {'n':>3}"
)


def observer_pct(arm: Cost, bare: Cost) -> float:
    """What the observer took of one core in a round: the harness process, plus its children's
    CPU per request beyond bare wrk's (wrk's Lua, ss, psql) at the arm's rate."""
    extra_us = max(0.0, arm.children_us_per_request - bare.children_us_per_request)
    return arm.self_cpu_pct + extra_us * arm.rps / 1e4


def summarize(server: str, scenario: str, arms: dict[str, list[Cost]]) -> list[str]:
    """Per arm: median req/s, the ratio to bare per round (median, min, max), median costs."""
    lines = []
    for arm, costs in arms.items():
        pairs = list(zip(costs, arms["bare"], strict=True))
        ratios = [c.rps / b.rps for c, b in pairs if b.rps]
        observer = statistics.median(observer_pct(c, b) for c, b in pairs)
        lines.append(
            f"{server:<14} {scenario:<10} {arm:<8} "
            f"{statistics.median(c.rps for c in costs):>9,.0f} "
            f"{statistics.median(ratios):>6.3f} {min(ratios):>6.3f} {max(ratios):>6.3f} "
            f"{statistics.median(c.self_cpu_pct for c in costs):>7.1f} "
            f"{statistics.median(c.children_us_per_request for c in costs):>7.1f} "
            f"{observer:>6.1f} "
            f"{len(costs):>3}"
        )
    return lines


def measure_server(
    site: LocalSite, opts: plan.Options, env: Environment, rounds: int, legacy: bool
) -> list[str]:
    """Start one server, run the arms in rotating order on each scenario, stop it."""
    spec = load_all()[opts.servers[0]]
    served = site.serve(spec, site.knobs(spec, opts.overrides), env, opts, f"{spec.id}.log")
    settings = Settings(
        table=site.table,
        run_dir=site.run_dir,
        duration_s=opts.duration_s,
        warmup_s=opts.warmup_s,
        keepalive=opts.keepalive,
        timeout_s=opts.study.load_timeout_s,
        load_cpus=None,
    )
    tool = Accounted(Wrk(opts.load_threads))
    primed: set[str] = set()
    observed: dict[str, Any] = {"harness": served} | ({"legacy": Legacy(served)} if legacy else {})

    def harness(arm: str, run: plan.RunSpec) -> Cost:
        measure_point(settings, tool, observed[arm], run, primed)  # type: ignore[arg-type]
        assert tool.last is not None
        return tool.last

    lines = []
    try:
        for scenario in opts.scenarios:
            arms: dict[str, list[Cost]] = {"bare": [], **{arm: [] for arm in observed}}
            order = list(arms)
            for number in range(1, rounds + 1):
                run = plan.RunSpec(spec.id, scenario, opts.concurrency[0], number)
                turn = order[number % len(order) :] + order[: number % len(order)]
                for arm in turn:
                    if arm == "bare":
                        arms[arm].append(bare_wrk(settings, served, run, opts.load_threads))
                    else:
                        arms[arm].append(harness(arm, run))
                said = ", ".join(f"{arm} {arms[arm][-1].rps:,.0f}" for arm in arms)
                print(
                    f"overhead: {spec.id} {scenario} round {number}/{rounds}: {said} req/s",
                    file=sys.stderr,
                )
            lines += summarize(spec.id, scenario, arms)
    finally:
        site.stop(served)
    return lines


def measure(opts: plan.Options, rounds: int, legacy: bool) -> int:
    """`python -m bench overhead` (make overhead) on validated options: the table on stdout;
    the exit status."""
    lines: list[str] = []
    where: list[Path] = []

    def body(table: ProcessTable, run_dir: Path) -> int:
        where.append(run_dir)
        site = LocalSite(table, run_dir, cpu_placement(False))
        status = 0
        try:
            specs = [load_all()[s] for s in opts.servers]
            prepared = site.prepare(
                specs, opts.arch, lambda text: print(f"overhead: {text}", file=sys.stderr)
            )
            site.open()
            for spec in specs:
                env = prepared[spec.id]
                if isinstance(env, Unavailable):
                    print(f"overhead: {spec.id}: {env.reason}", file=sys.stderr)
                    status = 1
                    continue
                one = dataclasses.replace(opts, servers=(spec.id,))
                lines.extend(measure_server(site, one, env, rounds, legacy))
        except ServeError as exc:
            print(f"overhead: {exc}", file=sys.stderr)
            status = 1
        return status

    status = supervised(body, "overhead", who="overhead")
    if status is None:
        return 1
    threads = max(1, min(opts.load_threads, opts.concurrency[0]))
    print(
        f"arm / bare wrk -t{threads} -c{opts.concurrency[0]} -d{opts.duration_s}s against the "
        f"same server, {rounds} rounds, arms in rotating order (run directory {where[0]})"
    )
    print(HEADER)
    for line in lines:
        print(line)
    return status if lines or status else 1
