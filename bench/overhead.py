"""make overhead: what the harness's observation costs, as requests/s lost against bare wrk.

Input: servers, scenarios, one concurrency, the duration and the number of rounds (make
variables; defaults: gunicorn-sync and granian, /plaintext and /db, c=50, 5 s, 8 rounds).
Output: per server and scenario, bare wrk's and the harness's requests/s (median over the
rounds), the harness/bare ratio per round (median, min, max) on stdout; the raw wrk output in
the run directory. The stack and each server start once; each round runs bare
`wrk -t<LOAD_THREADS> -c<c> -d<s>s` and the harness's own measured point (bench.measure,
the settings of make bench: warmup, drain, samplers, watchdog, the Lua report), alternating
which goes first so that drift on a shared machine falls on both. A benchmark, not a test:
nothing is asserted, nothing recorded under results/.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import dataclass

from bench import cli, plan
from bench.load import LoadRequest, run_bounded
from bench.load.wrk import Wrk, parse_wrk, wrk_binary
from bench.measure import Settings, measure_point
from bench.placement import cpu_placement
from bench.prepare import Unavailable
from bench.procs import Interrupted, ProcessTable, signals_ignored, signals_raise
from bench.registry import load_all
from bench.site import LocalServed, LocalSite, ServeError
from bench.state import LockedError, run_lock, state_base

SERVERS = "gunicorn-sync,granian"
SCENARIOS = "plaintext,db"
CONCURRENCY = "50"
DURATION_S = "5"
ROUNDS = 8  # pairs per server and route: enough for a median and a spread under others' load
ROUNDS_LIMITS = (1, 100)


@dataclass(frozen=True)
class Pair:
    """One round: bare wrk's and the harness's requests/s against the same server."""

    bare_rps: float
    harness_rps: float

    @property
    def ratio(self) -> float:
        """harness / bare."""
        return self.harness_rps / self.bare_rps if self.bare_rps else float("nan")


def summarize(server: str, scenario: str, pairs: list[Pair]) -> str:
    """One line: medians of both, the ratio's median and range over the rounds."""
    ratios = [p.ratio for p in pairs]
    bare = statistics.median(p.bare_rps for p in pairs)
    harness = statistics.median(p.harness_rps for p in pairs)
    return (
        f"{server:<14} {scenario:<10} {bare:>10,.0f} {harness:>10,.0f} "
        f"{statistics.median(ratios):>7.3f} {min(ratios):>7.3f} {max(ratios):>7.3f} {len(pairs):>3}"
    )


HEADER = (
    f"{'server':<14} {'route':<10} {'bare rps':>10} {'harness':>10} "
    f"{'ratio':>7} {'min':>7} {'max':>7} {'n':>3}"
)


def bare_wrk(settings: Settings, served: LocalServed, run: plan.RunSpec, threads: int) -> float:
    """Plain wrk, no script, no sampler, no watchdog: its requests/s."""
    request = LoadRequest(
        base_url=served.base_url,
        path=run.path,
        scenario=run.scenario,
        concurrency=run.concurrency,
        duration_s=settings.duration_s,
        out=settings.run_dir / f"{served.name}-{run.scenario}-r{run.trial}.bare.wrk.txt",
        timeout_s=settings.timeout_s,
    )
    argv = [
        wrk_binary(),
        f"-t{max(1, min(threads, run.concurrency))}",
        f"-c{run.concurrency}",
        f"-d{settings.duration_s}s",
        # the harness's timeout: a slow answer is the same error in both, not a difference
        f"--timeout={settings.timeout_s}s",
        request.url,
    ]
    served.wait_idle()
    proc = run_bounded(
        settings.table, "wrk-bare", argv, request.out, settings.duration_s + 30, request
    )
    text = request.out.read_text(errors="replace")
    if proc.exit_code() != 0:
        raise RuntimeError(f"bare wrk exited with {proc.exit_code()}: {text.strip()[-300:]}")
    return parse_wrk(text).rps


def measure_server(
    site: LocalSite, opts: plan.Options, spec_id: str, env: object, rounds: int
) -> list[str]:
    """Start one server, alternate bare wrk and the harness on each scenario, stop it."""
    spec = load_all()[spec_id]
    served = site.serve(spec, site.knobs(spec, opts.overrides), env, opts, f"{spec_id}.log")  # type: ignore[arg-type]
    settings = Settings(
        table=site.table,
        run_dir=site.run_dir,
        duration_s=opts.duration_s,
        warmup_s=opts.warmup_s,
        keepalive=opts.keepalive,
        timeout_s=opts.load_timeout_s,
        load_cpus=None,
    )
    tool = Wrk(opts.load_threads)
    primed: set[str] = set()
    lines = []
    try:
        for scenario in opts.scenarios:
            pairs = []
            for number in range(1, rounds + 1):
                run = plan.RunSpec(spec_id, scenario, opts.concurrency[0], number)
                harness_first = number % 2 == 0
                if harness_first:
                    harness = measure_point(settings, tool, served, run, primed).result.rps
                bare = bare_wrk(settings, served, run, opts.load_threads)
                if not harness_first:
                    harness = measure_point(settings, tool, served, run, primed).result.rps
                pairs.append(Pair(bare, harness))
                print(
                    f"overhead: {spec_id} {scenario} round {number}/{rounds}: bare {bare:,.0f}, "
                    f"harness {harness:,.0f} req/s ({harness / bare:.3f})",
                    file=sys.stderr,
                )
            lines.append(summarize(spec_id, scenario, pairs))
    finally:
        site.stop(served)
    return lines


def parse_args(argv: list[str] | None) -> tuple[plan.Options, int]:
    """Validated options (bench.cli's rules) and the number of rounds; UsageError."""
    parser = argparse.ArgumentParser(prog="python -m bench.overhead")
    parser.add_argument("--server", default=SERVERS)
    parser.add_argument("--scenario", default=SCENARIOS)
    parser.add_argument("--concurrency", default=CONCURRENCY)
    parser.add_argument("--duration", default=DURATION_S)
    parser.add_argument("--rounds", default=str(ROUNDS))
    parser.add_argument("--load-threads", default=None)
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        raise cli.UsageError(
            f"unknown option {unknown[0]}; valid: SERVER SCENARIO CONCURRENCY "
            "DURATION ROUNDS LOAD_THREADS"
        )
    run_argv = [
        "run",
        f"--server={args.server}",
        f"--scenario={args.scenario}",
        f"--concurrency={args.concurrency}",
        f"--duration={args.duration}",
    ]
    if args.load_threads is not None:
        run_argv.append(f"--load-threads={args.load_threads}")
    opts = cli.options_from(cli.build_parser().parse_args(run_argv))
    if len(opts.concurrency) != 1:
        raise cli.UsageError("make overhead measures one CONCURRENCY; give one number")
    try:
        rounds = int(args.rounds)
    except ValueError:
        rounds = 0
    if not ROUNDS_LIMITS[0] <= rounds <= ROUNDS_LIMITS[1]:
        raise cli.UsageError(f"ROUNDS={args.rounds!r} is not a whole number in 1..100")
    return opts, rounds


def main(argv: list[str] | None = None) -> int:
    """Entry point of `python -m bench.overhead` (make overhead); the exit status."""
    try:
        opts, rounds = parse_args(argv)
    except cli.UsageError as exc:
        print(f"overhead: {exc}", file=sys.stderr)
        return 2
    base = state_base()
    run_dir = base / "runs" / (time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + "-overhead")
    run_dir.mkdir(parents=True, exist_ok=True)
    lines = []
    try:
        with run_lock(base), signals_raise():
            table = ProcessTable()
            site = LocalSite(table, run_dir, cpu_placement(False))
            try:
                specs = [load_all()[s] for s in opts.servers]
                say = lambda text: print(f"overhead: {text}", file=sys.stderr)  # noqa: E731
                prepared = site.prepare(specs, opts.arch, say)
                site.open()
                for spec in specs:
                    env = prepared[spec.id]
                    if isinstance(env, Unavailable):
                        print(f"overhead: {spec.id}: {env.reason}", file=sys.stderr)
                        continue
                    lines += measure_server(site, opts, spec.id, env, rounds)
            except ServeError as exc:
                print(f"overhead: {exc}", file=sys.stderr)
                return 1
            except (KeyboardInterrupt, Interrupted):
                print("overhead: interrupted: stopping everything", file=sys.stderr)
                return 130
            finally:
                with signals_ignored():
                    table.stop_all()
    except LockedError as exc:
        print(f"overhead: {exc}; wait for it to finish", file=sys.stderr)
        return 1
    threads = max(1, min(opts.load_threads, opts.concurrency[0]))
    print(
        f"harness / bare wrk -t{threads} -c{opts.concurrency[0]} -d{opts.duration_s}s, "
        f"{rounds} alternated rounds per row (run directory {run_dir})"
    )
    print(HEADER)
    for line in lines:
        print(line)
    return 0 if lines else 1


if __name__ == "__main__":
    sys.exit(main())
