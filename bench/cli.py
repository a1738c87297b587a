"""Command line: make variables -> validated Options, and the exit codes.

Input: argv (`python -m bench run --server=... `, `python -m bench report`). Output: the exit
status: 0 all runs ok, 1 some run failed, 2 bad input (one line on stderr naming the valid
choices; nothing started, nothing written).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import random
import sys
import tempfile
import urllib.parse
from collections.abc import Callable
from pathlib import Path

from bench.core import defaults, plan
from bench.core.registry import OVERRIDABLE, DeclarationError, load_all, server_ids
from bench.host.arch import ArchError, check_emulation_supported, host_arch, normalize_arch
from bench.host.metadata import machine_label
from bench.load import (
    default_load_threads,
    default_name,
    open_loop_name,
    scenarios_for,
    tools,
)
from bench.load import names as load_names
from bench.studies.study import StudyError

# name -> (lowest, highest) accepted
LIMITS = {
    "concurrency": (1, 10_000),
    "duration": (1, 86_400),  # make soak runs for hours
    "warmup": (0, 600),
    "trials": (1, 100),
    "workers": (1, 256),
    "threads": (1, 1_024),
    "connections": (1, 100_000),
    "backlog": (1, 65_535),
    "load_threads": (1, 64),
    "seed": (0, 2**31),
    "locust_workers": (0, 64),
    "proxy_timeout": (1, 600),
    "rate": (1, 1_000_000),
    "slo_p99_ms": (1, 600_000),
    "slo_p999_ms": (1, 600_000),
    "capacity_budget": (10, 86_400),
    "soak_interval": (1, 600),
    "recycle": (1, 10_000_000),
}
SWITCHES = {"on": True, "off": False, "1": True, "0": False}


class UsageError(ValueError):
    """Bad input: reported in one line with exit status 2."""


def validate_int(name: str, raw: str) -> int:
    """An integer within LIMITS[name]."""
    low, high = LIMITS[name]
    try:
        value = int(raw.strip())
    except ValueError:
        raise UsageError(f"{name.upper()}={raw!r} is not a whole number ({low}..{high})") from None
    if not low <= value <= high:
        raise UsageError(f"{name.upper()}={value} is out of range {low}..{high}")
    return value


def validate_int_list(name: str, raw: str) -> tuple[int, ...]:
    """A comma list of integers within LIMITS[name], duplicates removed, order kept."""
    items = [item for item in raw.split(",") if item.strip()]
    if not items:
        raise UsageError(f"{name.upper()} is empty; give a comma list of numbers")
    return tuple(dict.fromkeys(validate_int(name, item) for item in items))


def validate_choices(name: str, raw: str, valid: list[str], allow_all: bool) -> tuple[str, ...]:
    """A comma list of names from `valid` (or `all`)."""
    items = [item.strip() for item in raw.split(",") if item.strip()]
    if allow_all and items == ["all"]:
        return tuple(valid)
    unknown = [item for item in items if item not in valid]
    if unknown or not items:
        choices = ", ".join(valid) + (", all" if allow_all else "")
        raise UsageError(f"unknown {name.upper()} {','.join(unknown) or raw!r}; valid: {choices}")
    return tuple(dict.fromkeys(items))


def validate_switch(name: str, raw: str) -> bool:
    """on/off (or 1/0)."""
    try:
        return SWITCHES[raw.strip().lower()]
    except KeyError:
        raise UsageError(f"{name.upper()}={raw!r} is not a switch; valid: on, off") from None


def validate_choice(name: str, raw: str, valid: tuple[str, ...]) -> str:
    """Exactly one of `valid`."""
    value = raw.strip().lower()
    if value not in valid:
        raise UsageError(f"unknown {name.upper()} {raw!r}; valid: {', '.join(valid)}")
    return value


def validate_target(raw: str) -> str:
    """http://host:port (no path): a server running elsewhere."""
    parsed = urllib.parse.urlsplit(raw.strip())
    try:
        port = parsed.port
    except ValueError:
        port = None
    if (
        parsed.scheme != "http"
        or not parsed.hostname
        or port is None
        or parsed.path not in ("", "/")
    ):
        raise UsageError(f"TARGET={raw!r} is not http://host:port (e.g. http://10.0.0.5:8000)")
    return f"http://{parsed.hostname}:{port}"


def validate_results(raw: str) -> Path:
    """A results directory that exists or can be created, and is writable."""
    path = Path(raw)
    path = path.absolute()
    probe = path
    while not probe.exists():
        probe = probe.parent
    try:
        if not probe.is_dir():
            raise OSError
        # os.access() says yes to root everywhere; only a real (anonymous) file tells.
        with tempfile.TemporaryFile(dir=probe):
            pass
    except OSError:
        raise UsageError(f"RESULTS={raw!r} is not a writable directory") from None
    return path


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of a harness run (make bench's variables)."""
    parser.add_argument("--server", default=defaults.SERVER)
    parser.add_argument("--concurrency", default=None)  # depends on LOAD (open-loop: the pool)
    parser.add_argument("--rate", default=None)
    parser.add_argument("--duration", default=str(defaults.DURATION_S))
    parser.add_argument("--warmup", default=str(defaults.WARMUP_S))
    parser.add_argument("--trials", default=str(defaults.TRIALS))
    parser.add_argument("--results", default=defaults.RESULTS)
    parser.add_argument("--scenario", default=None)  # depends on LOAD
    parser.add_argument("--arch", default=None)
    for name in (*OVERRIDABLE, "load-threads", "seed"):
        parser.add_argument(f"--{name}", default=None)
    parser.add_argument("--proxy", default=defaults.PROXY)
    parser.add_argument("--keepalive", default="on" if defaults.KEEPALIVE else "off")
    parser.add_argument("--upstream-keepalive", default=None)
    parser.add_argument("--proxy-timeout", default=str(defaults.PROXY_TIMEOUT_S))
    parser.add_argument("--pin", default="1" if defaults.PIN else "0")
    parser.add_argument("--load", default=default_name())
    parser.add_argument("--locust-workers", default=str(defaults.LOCUST_WORKERS))
    parser.add_argument("--target", default=None)
    parser.add_argument("--runtime", default=defaults.RUNTIME)
    parser.add_argument("--cpu-quota", default=None)
    parser.add_argument("--lifecycle", default=None)
    parser.add_argument("--recycle", default=None)


def build_parser() -> argparse.ArgumentParser:
    """The `python -m bench` argument parser (make passes the variables as options)."""
    parser = _Parser(prog="python -m bench", description="Python web server benchmark")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="verify and measure servers")
    add_run_arguments(run)
    capacity = sub.add_parser("capacity", help="each server's capacity within a latency objective")
    add_run_arguments(capacity)
    capacity.set_defaults(
        load=open_loop_name(),
        duration=str(defaults.CAPACITY_DURATION_S),
        warmup=str(defaults.CAPACITY_WARMUP_S),
        trials="1",
    )
    capacity.add_argument("--slo-p99-ms", default=str(defaults.SLO_P99_MS))
    capacity.add_argument("--slo-p999-ms", default=None)
    capacity.add_argument("--budget", default=str(defaults.CAPACITY_BUDGET_S))
    serve = sub.add_parser("serve", help="a verified stack and server left up until Ctrl-C")
    add_run_arguments(serve)
    soak = sub.add_parser("soak", help="memory of every server process over a long fixed-rate run")
    add_run_arguments(soak)
    soak.set_defaults(
        load=open_loop_name(),
        duration=str(defaults.SOAK_DURATION_S),
        warmup=str(defaults.SOAK_WARMUP_S),
        trials="1",
        rate=str(defaults.SOAK_RATE),
        scenario=defaults.SOAK_SCENARIO,
    )
    soak.add_argument("--interval", default=str(defaults.SOAK_INTERVAL_S))
    report = sub.add_parser("report", help="rebuild summary.md from the records")
    report.add_argument("--results", default=defaults.RESULTS)
    compare = sub.add_parser("compare", help="two result sets side by side (BASE, HEAD)")
    compare.add_argument("--base", default=None)
    compare.add_argument("--head", default=None)
    study = sub.add_parser("study", help="re-run a source document's experiment")
    study.add_argument("--name", default=None)
    study.add_argument("--duration", default=None)
    study.add_argument("--results", default=defaults.RESULTS)
    study.add_argument("--seed", default=None)
    return parser


def study_names_from(raw: str | None) -> list[str]:
    """NAME: one study, a comma list, or all."""
    from bench.studies.lbfile import lb_study_names
    from bench.studies.study import study_names

    valid = study_names() + lb_study_names()
    if not raw:
        raise UsageError(f"NAME is required; valid: {', '.join(valid)}, all")
    return list(validate_choices("name", raw, valid, allow_all=True))


def _sections(results: Path) -> Callable[[list], list[str]]:
    """The studies' summary sections, for report.write_summary."""
    from bench.studies import lbreport, study

    return lambda records: (
        study.summary_sections(records, results) + lbreport.summary_sections(records)
    )


def validate_load(args: argparse.Namespace) -> dict[str, object]:
    """LOAD, SCENARIO and the load tool's own variables, checked against what the tool takes."""
    load_tool = validate_choice("load", args.load, load_names())
    drivable = scenarios_for(load_tool)
    # The default scenarios, or (a tool that drives none of them: Locust) all of the tool's.
    default = [s for s in defaults.SCENARIOS if s in drivable] or list(drivable)
    scenario_raw = args.scenario or ",".join(default)
    scenarios = validate_choices("scenario", scenario_raw, list(plan.SCENARIOS), allow_all=True)
    if scenario_raw.strip() == "all":
        scenarios = drivable
    wrong = [s for s in scenarios if s not in drivable]
    if wrong:
        raise UsageError(
            f"SCENARIO={','.join(wrong)} cannot run with LOAD={load_tool}; valid with it: "
            f"{', '.join(drivable)}"
        )
    tool = tools()[load_tool]
    locust_workers = validate_int("locust_workers", args.locust_workers)
    if locust_workers and "LOCUST_WORKERS" not in tool.variables:
        takers = [name for name, t in tools().items() if "LOCUST_WORKERS" in t.variables]
        raise UsageError(f"LOCUST_WORKERS needs LOAD={' or '.join(takers)}")
    open_loop = [name for name, t in tools().items() if t.open_loop]
    if tool.open_loop and not args.rate:
        raise UsageError(
            f"LOAD={load_tool} sends a fixed arrival rate: give RATE=, a comma list of "
            "requests/s (e.g. RATE=500,1000)"
        )
    if args.rate and not tool.open_loop:
        raise UsageError(f"RATE needs an open-loop load tool: LOAD={' or '.join(open_loop)}")
    rates = validate_int_list("rate", args.rate) if args.rate else ()
    # An open-loop tool's CONCURRENCY is its connection pool: by default sized per rate.
    default_concurrency = "" if tool.open_loop else ",".join(map(str, defaults.CONCURRENCY))
    raw = args.concurrency if args.concurrency is not None else default_concurrency
    return {
        "load_tool": load_tool,
        "scenarios": scenarios,
        "load_workers": locust_workers,
        "rates": rates,
        "concurrency": validate_int_list("concurrency", raw) if raw else (),
    }


def validate_proxy(args: argparse.Namespace) -> dict[str, object]:
    """PROXY, KEEPALIVE, UPSTREAM_KEEPALIVE, PROXY_TIMEOUT and TARGET, checked together."""
    proxy = validate_choice("proxy", args.proxy, plan.PROXIES)
    keepalive = validate_switch("keepalive", args.keepalive)
    if args.upstream_keepalive is not None and proxy == "none":
        raise UsageError("UPSTREAM_KEEPALIVE applies between nginx and the server: add PROXY=nginx")
    upstream_keepalive = (
        validate_switch("upstream_keepalive", args.upstream_keepalive)
        if args.upstream_keepalive is not None
        else keepalive
    )
    if proxy == "alb" and args.upstream_keepalive is not None and not upstream_keepalive:
        raise UsageError(
            "UPSTREAM_KEEPALIVE=off: an ALB always keeps target connections alive; "
            "valid: PROXY=nginx with UPSTREAM_KEEPALIVE=off, or PROXY=alb without it"
        )
    if proxy == "alb":
        upstream_keepalive = True  # a cloud balancer has no switch for it
    if args.target and proxy != "none":
        raise UsageError(
            "TARGET drives a server elsewhere: put nginx in front there; valid: PROXY=none"
        )
    return {
        "proxy": None if proxy == "none" else proxy,
        "keepalive": keepalive,
        "upstream_keepalive": None if proxy == "none" else upstream_keepalive,
        "proxy_timeout_s": validate_int("proxy_timeout", args.proxy_timeout),
        "target": validate_target(args.target) if args.target else None,
    }


def validate_cpu_quota(raw: str | None, target: str | None = None) -> float | None:
    """CPU_QUOTA: CPUs (any fraction) the server may use, as a container runtime's limit;
    refused where this process cannot create cgroups (not root, no cpu controller)."""
    if raw is None or not raw.strip():
        return None
    from bench.host import cgroup

    try:
        quota = float(raw.strip())
        cgroup.quota_us(quota)
    except ValueError:
        raise UsageError(
            f"CPU_QUOTA={raw!r} is not a number of CPUs in {cgroup.QUOTA_MIN:g}.."
            f"{cgroup.QUOTA_MAX:g} (e.g. 0.5, 1, 1.5)"
        ) from None
    if target is not None:
        raise UsageError("CPU_QUOTA limits a server started here: it cannot apply to TARGET=")
    problem = cgroup.unavailable()
    if problem is not None:
        raise UsageError(problem)
    return quota


def validate_lifecycle(raw: str | None, load: dict[str, object], target: str | None) -> str | None:
    """LIFECYCLE: an event in the middle of each measured window, at a fixed arrival rate."""
    if raw is None or not raw.strip():
        return None
    from bench.observe.lifecycle import EVENTS

    event = validate_choice("lifecycle", raw, EVENTS)
    if not load["rates"]:
        raise UsageError(
            f"LIFECYCLE={event} needs a fixed arrival rate that does not slow down with the "
            f"server: LOAD={open_loop_name()} RATE=<req/s>"
        )
    if target is not None:
        raise UsageError(f"LIFECYCLE={event} signals a server started here: not with TARGET=")
    return event


def validate_recycle(raw: str | None, target: str | None) -> int | None:
    """RECYCLE: requests per worker before the server's own recycling replaces it."""
    if raw is None or not raw.strip():
        return None
    if target is not None:
        raise UsageError("RECYCLE sets flags of a server started here: not with TARGET=")
    return validate_int("recycle", raw)


def options_from(args: argparse.Namespace) -> plan.Options:
    """Validate every run option; raise UsageError on the first bad one."""
    load_all()  # a broken declaration is bad input too: refuse before anything starts
    servers = validate_choices("server", args.server, server_ids(), allow_all=True)
    load = validate_load(args)
    proxy = validate_proxy(args)
    pin = validate_switch("pin", args.pin)
    if pin and len(os.sched_getaffinity(0)) < 2:
        raise UsageError("PIN=1 needs at least 2 usable CPUs; this process may use 1")
    duration = validate_int("duration", args.duration)
    warmup = validate_int("warmup", args.warmup)
    trials = validate_int("trials", args.trials)
    try:
        arch = normalize_arch(args.arch) if args.arch else host_arch()
        check_emulation_supported(arch)
    except ArchError as exc:
        raise UsageError(str(exc)) from None
    overrides = {
        name: validate_int(name, getattr(args, name))
        for name in OVERRIDABLE
        if getattr(args, name) is not None
    }
    load_threads = (
        validate_int("load_threads", args.load_threads) if args.load_threads is not None else None
    )
    seed = validate_int("seed", args.seed) if args.seed is not None else random.randrange(2**31)
    return plan.Options(
        servers=servers,
        duration_s=duration,
        warmup_s=warmup,
        trials=trials,
        arch=arch,
        results=validate_results(args.results),
        overrides=overrides,
        load_threads=load_threads or default_load_threads(),
        seed=seed,
        pin=pin,
        runtime=validate_choice("runtime", args.runtime, plan.RUNTIMES),
        cpu_quota=validate_cpu_quota(args.cpu_quota, proxy["target"]),  # type: ignore[arg-type]
        lifecycle=validate_lifecycle(args.lifecycle, load, proxy["target"]),  # type: ignore[arg-type]
        recycle=validate_recycle(args.recycle, proxy["target"]),  # type: ignore[arg-type]
        **load,  # type: ignore[arg-type]
        **proxy,  # type: ignore[arg-type]
    )


def check_open_loop(load: str) -> None:
    """make capacity searches over arrival rates: only an open-loop load tool can send them."""
    valid = [name for name, tool in tools().items() if tool.open_loop]
    if load in tools() and load not in valid:
        raise UsageError(
            f"make capacity needs a fixed arrival rate; LOAD={load} is closed-loop; "
            f"valid: LOAD={' or '.join(valid)}"
        )


def with_objective(options: plan.Options, args: argparse.Namespace) -> plan.Options:
    """make capacity: the objective (SLO_P99_MS, SLO_P999_MS, CAPACITY_BUDGET), checked
    against an open-loop load tool; RATE's first value, when given, starts the search."""
    objective = plan.Objective(
        p99_ms=validate_int("slo_p99_ms", args.slo_p99_ms),
        p999_ms=validate_int("slo_p999_ms", args.slo_p999_ms) if args.slo_p999_ms else None,
        budget_s=validate_int("capacity_budget", args.budget),
        start_rps=options.rates[0],
    )
    # One search per scenario: the plan's points are its templates.
    return dataclasses.replace(options, rates=(objective.start_rps,), objective=objective)


def check_serve(options: plan.Options) -> None:
    """make serve: exactly one server, started here."""
    if len(options.servers) != 1:
        raise UsageError(f"make serve starts one server; valid SERVER: {', '.join(server_ids())}")
    if options.target is not None:
        raise UsageError("make serve starts the server here; TARGET applies to make bench only")


def with_soak(options: plan.Options, raw_interval: str) -> plan.Options:
    """make soak: one rate, a local server, RSS sampled every SOAK_INTERVAL seconds (at least
    3 samples in DURATION, for a slope)."""
    interval = validate_int("soak_interval", raw_interval)
    if options.target is not None:
        raise UsageError("make soak samples the server's memory here: not with TARGET=")
    if len(options.rates) != 1:
        raise UsageError("make soak runs at one fixed rate: RATE=<req/s> (one number)")
    if options.duration_s < 3 * interval:
        raise UsageError(
            f"DURATION={options.duration_s} holds fewer than 3 samples of SOAK_INTERVAL="
            f"{interval}: a memory slope needs 3; raise DURATION or lower SOAK_INTERVAL"
        )
    return dataclasses.replace(options, soak_interval_s=float(interval))


def _os_problem(exc: OSError) -> str:
    """An OSError in one line: what and where, without the errno."""
    where = exc.filename2 or exc.filename  # a rename fails on its target
    return f"{where}: {exc.strerror}" if where and exc.strerror else str(exc)


def _result_set(name: str, raw: str | None, other: str | None) -> list:
    """The records of an existing results directory (BASE= or HEAD=), without those of the
    other set when it is nested inside this one (results and results/after)."""
    from bench.core.record import load_records

    if not raw:
        raise UsageError(
            f"{name}= is required: a results directory (e.g. results, results/reference)"
        )
    path = Path(raw)
    if not path.is_dir():
        raise UsageError(f"{name}={raw!r} is not a directory of results")
    inner = Path(other).resolve() if other else None
    nested = inner is not None and inner != path.resolve() and inner.is_relative_to(path.resolve())
    records, problems = load_records(path, exclude=inner if nested else None)
    for problem in problems:
        print(f"compare: {name}: {problem}", file=sys.stderr)
    return records


def _compare(base_dir: str | None, head_dir: str | None) -> int:
    """`make compare`: the report on stdout; sets it cannot compare are bad input."""
    from bench.report import compare

    base = _result_set("BASE", base_dir, head_dir)
    head = _result_set("HEAD", head_dir, base_dir)
    try:
        lines = compare.render(base, head, str(base_dir), str(head_dir))
    except compare.CompareError as exc:
        raise UsageError(str(exc)) from None
    print("\n".join(lines))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of `python -m bench`."""
    from bench.host import netns

    # Namespaces a killed harness left behind (its pid gone) are removed at the next start.
    for name in netns.remove_leftovers():
        print(
            f"bench: removed network namespace {name} left by a harness that died", file=sys.stderr
        )
    try:
        args = build_parser().parse_args(argv)
        try:
            machine_label()  # MACHINE=, checked before anything starts
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        if args.command == "report":
            from bench.report import summary as report

            results = validate_results(args.results)
            try:
                path = report.write_summary(results, _sections(results))
            except OSError as exc:
                raise UsageError(f"RESULTS={args.results!r}: {_os_problem(exc)}") from None
            print(f"wrote {path}")
            return 0
        if args.command == "compare":
            return _compare(args.base, args.head)
        if args.command == "study":
            from bench.studies import study

            names = study_names_from(args.name)
            duration = validate_int("duration", args.duration) if args.duration else None
            from bench.host.netns import root_problem
            from bench.studies.lbfile import lb_study_names

            # Load-balancer studies run each arm in a namespace of their own (bench.studies.lbstudy)
            # the others through the common harness.
            lb_names = [n for n in names if n in lb_study_names()]
            names = [n for n in names if n not in lb_names]
            if args.name.strip() == "all" and lb_names and root_problem() is not None:
                # NAME=all without root: every study that can run here, and one line on why
                # the namespace studies do not.
                print(f"bench: skipping {', '.join(lb_names)}: {root_problem()}", file=sys.stderr)
                lb_names = []
            lb_status = 0
            if lb_names:
                from bench.report import summary as report
                from bench.studies import lbstudy

                results = validate_results(args.results)
                lb_status = lbstudy.execute(
                    lb_names,
                    results,
                    lambda: report.write_summary(results, _sections(results)),
                    duration,
                )
                if lb_status in (2, 130) or not names:
                    return lb_status
            base = options_from(
                build_parser().parse_args(
                    ["run", f"--results={args.results}"]
                    + ([f"--seed={args.seed}"] if args.seed else [])
                )
            )
            from bench.harness import run

            # Two phases per study: the arms that need nothing measured, then those whose
            # rates and knobs come from the first phase's records (bench.studies.study).
            return max(
                lb_status,
                study.execute_studies(names, base, duration, run.execute, _sections(base.results)),
            )
        if args.command == "capacity":
            check_open_loop(args.load)
            if args.rate is None:
                args.rate = str(defaults.CAPACITY_START_RPS)  # where the search starts
        options = options_from(args)
        if args.command == "serve":
            check_serve(options)
        if args.command == "capacity":
            if options.lifecycle or options.recycle:
                raise UsageError(
                    "make capacity searches a steady server's rate: LIFECYCLE and RECYCLE "
                    "apply to make bench, make soak and studies"
                )
            options = with_objective(options, args)
        if args.command == "soak":
            options = with_soak(options, args.interval)
    except (UsageError, DeclarationError, StudyError) as exc:
        print(f"bench: {exc}", file=sys.stderr)
        return 2
    if args.command == "serve":
        from bench.harness import serve

        return serve.serve(options)
    from bench.harness import run

    return run.execute(options, _sections(options.results))
