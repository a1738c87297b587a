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
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from bench.core import defaults, plan, scenario
from bench.core.app import AppError, AppSpec, parse_app
from bench.core.registry import OVERRIDABLE, DeclarationError, load_all, server_ids
from bench.core.validate import (  # noqa: F401  (re-exported: tests and overhead use cli.*)
    LIMITS,
    SWITCHES,
    UsageError,
    validate_choice,
    validate_choices,
    validate_cpus,
    validate_int,
    validate_int_list,
    validate_memory,
    validate_results,
    validate_switch,
    validate_target,
    validate_trials,
)
from bench.core.variables import VARIABLES, for_command, help_lines
from bench.host.arch import ArchError, check_emulation_supported, host_arch, normalize_arch
from bench.host.metadata import machine_label
from bench.load import (
    default_load_threads,
    default_name,
    open_loop_name,
    scenarios_for,
    tools,
    traits,
)
from bench.load import names as load_names
from bench.studies.schema import StudyError, load_study

if TYPE_CHECKING:
    from bench.harness.nested import Design


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of a harness run: make bench's variables (bench/core/variables.py)."""
    for variable in VARIABLES:
        if "run" in variable.commands:
            parser.add_argument(variable.option, default=variable.unset)


def add_own_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    """The variables only `command` takes (make capacity's objective, make soak's interval)."""
    for variable in for_command(command):
        if "run" not in variable.commands:
            parser.add_argument(variable.option, default=variable.unset)


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
        trials=str(defaults.CAPACITY_KNEE_TRIALS),
    )
    add_own_arguments(capacity, "capacity")
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
    add_own_arguments(soak, "soak")
    noise = sub.add_parser("noise", help="this machine's noise: one server in rounds of starts")
    add_run_arguments(noise)
    noise.set_defaults(
        scenario=defaults.NOISE_SCENARIO,
        concurrency=str(defaults.NOISE_CONCURRENCY),
        duration=str(defaults.NOISE_DURATION_S),
    )
    add_own_arguments(noise, "noise")
    noise.set_defaults(rounds=str(defaults.NOISE_ROUNDS))
    report = sub.add_parser("report", help="rebuild summary.md from the records")
    report.add_argument("--results", default=defaults.RESULTS)
    compare = sub.add_parser("compare", help="two result sets side by side (BASE, HEAD)")
    compare.add_argument("--base", default=None)
    compare.add_argument("--head", default=None)
    images = sub.add_parser("images", help="build the base image and one image per server")
    images.add_argument("--server", default=defaults.SERVER)
    images.add_argument("--arch", default=None)
    export = sub.add_parser("export", help="one row per point as CSV or JSON on stdout")
    export.add_argument("--format", default=None)
    export.add_argument("--results", default=defaults.RESULTS)
    study = sub.add_parser("study", help="re-run a source document's experiment")
    study.add_argument("--name", default=None)
    study.add_argument("--arms", default=None)
    study.add_argument("--duration", default=None)
    study.add_argument("--results", default=defaults.RESULTS)
    study.add_argument("--seed", default=None)
    sub.add_parser("help", help="make help: variables, scenarios, studies and servers")
    variables = sub.add_parser("variables", help="the make variables a command takes (Makefile)")
    variables.add_argument("of", choices=sorted({c for v in VARIABLES for c in v.commands}))
    return parser


def study_names_from(raw: str | None) -> list[str]:
    """NAME: one study, a comma list, or all."""
    valid = study_names()
    if not raw:
        raise UsageError(f"NAME is required; valid: {', '.join(valid)}, all")
    return list(validate_choices("name", raw, valid, allow_all=True))


def study_arms_from(raw: str | None, names: list[str]) -> tuple[str, ...] | None:
    """ARMS: arm ids of the named studies (None: every arm, `all`). A second-phase arm is refused:
    its rates or knobs come from the first phase's records of the same run."""
    if not raw or raw.strip() == "all":
        return None
    arms = [a for name in names for a in load_study(name).arms]
    chosen = validate_choices("arms", raw, list(dict.fromkeys(a.id for a in arms)), False)
    derived = [a.id for a in arms if a.id in chosen and a.derived]
    if derived:
        raise UsageError(
            f"ARMS {','.join(derived)}: derived from the first phase's arms of the same run "
            "(rates_from, from_best); run the whole study"
        )
    return chosen


def _sections(results: Path) -> Callable[[list], list[str]]:
    """The studies' summary sections, for report.write_summary."""
    from bench.studies.runner import sections_for

    return sections_for(results)


def validate_app_scenarios(app: AppSpec, raw: str | None) -> tuple[str, ...]:
    """APP=: SCENARIO names routes of APP_ROUTES (default: every route with weight > 0), each
    measured on its own with a tool that requests one URL."""
    loaded = [r.name for r in app.loaded_routes]
    names = validate_choices("scenario", raw or "all", loaded, allow_all=True)
    routes = {r.name: r for r in app.loaded_routes}
    return tuple(app.scenario(routes[n]) for n in names)


def validate_app(args: argparse.Namespace) -> AppSpec | None:
    """APP, APP_ROUTES, APP_REQUIREMENTS, APP_KIND (files read, nothing imported yet)."""
    raw = getattr(args, "app", None)
    companions = ("app_routes", "app_requirements", "app_kind")
    if not raw:
        given = [n.upper() for n in companions if getattr(args, n, None)]
        if given:
            raise UsageError(f"{', '.join(given)} needs APP=<path or module>:<callable>")
        return None
    if args.target:
        raise UsageError("APP starts your app here; TARGET drives a server elsewhere: not both")
    try:
        return parse_app(raw, args.app_routes, args.app_requirements, args.app_kind)
    except AppError as exc:
        raise UsageError(str(exc)) from None


def validate_load(args: argparse.Namespace, app: AppSpec | None = None) -> dict[str, object]:
    """LOAD, SCENARIO and the load tool's own variables, checked against what the tool takes."""
    load_tool = validate_choice("load", args.load or default_name(), load_names())
    app_scenario = args.scenario
    if app is not None:
        url_tools = [n for n in load_names() if traits(n).drives == scenario.URL]  # type: ignore[union-attr]
        if load_tool not in url_tools:
            raise UsageError(
                f"APP runs with LOAD={' or '.join(url_tools)}; LOAD={load_tool} plays its own mix"
            )
        # The user's routes, not app_common's scenarios (checked below).
        args = argparse.Namespace(**{**vars(args), "scenario": "plaintext"})
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
    if app is not None:
        scenarios = validate_app_scenarios(app, app_scenario)
    return {
        "load_tool": load_tool,
        "scenarios": scenarios,
        "app": app,
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


def validate_network(args: argparse.Namespace, runtime: str) -> str:
    """NETWORK: the server container's network; bridge only with RUNTIME=docker, and with
    the load tool talking to the server directly (no PROXY=)."""
    network = validate_choice("network", getattr(args, "network", None), plan.NETWORKS)
    if network == "host":
        return network
    if runtime != "docker":
        raise UsageError(f"NETWORK={network} is the server container's network: add RUNTIME=docker")
    if (getattr(args, "proxy", None) or "none") != "none":
        raise UsageError(f"PROXY is not supported with NETWORK={network}; valid: NETWORK=host")
    return network


def validate_runtime(
    args: argparse.Namespace, servers: tuple[str, ...], arch: str, target: str | None
) -> dict[str, object]:
    """RUNTIME, CPUS and MEMORY: RUNTIME=docker needs an engine and each server's current
    image; CPUS and MEMORY are the container's limits, in docker's own syntax."""
    runtime = validate_choice("runtime", args.runtime, plan.RUNTIMES)
    network = validate_network(args, runtime)
    cpus_raw = (args.cpus or "").strip()
    memory_raw = (args.memory or "").strip()
    if runtime != "docker":
        if cpus_raw or memory_raw:
            raise UsageError(
                "CPUS and MEMORY limit the server's container: add RUNTIME=docker "
                "(a native server's CPU limit is CPU_QUOTA=)"
            )
        return {"mode": plan.Mode(runtime=runtime)}
    from bench.core.registry import load_all
    from bench.host import docker, images

    limits: dict[str, object] = {"mode": plan.Mode(runtime=runtime), "network": network}
    if cpus_raw:
        limits["cpus"] = validate_cpus(cpus_raw)
    if memory_raw:
        limits["memory_bytes"] = validate_memory(memory_raw)
    for name, value in (("TARGET", target), ("CPU_QUOTA", args.cpu_quota)):
        if value:
            raise UsageError(
                f"RUNTIME=docker starts the server in its container here: not with {name}= "
                "(its CPU limit is CPUS=)"
            )
    unsupported = (("LIFECYCLE", args.lifecycle), ("RECYCLE", args.recycle))
    for name, value in (*unsupported, ("APP", getattr(args, "app", None))):
        if value:
            raise UsageError(f"{name} is not supported with RUNTIME=docker; valid: RUNTIME=native")
    if validate_switch("pin", args.pin):
        raise UsageError("PIN=1 is not supported with RUNTIME=docker; valid: PIN=0")
    problem = images.arch_problem(arch, host_arch()) or docker.engine_problem()
    if problem is not None:
        raise UsageError(problem)
    specs = load_all()
    for server in servers:
        try:
            images.image_for(specs[server], arch)
        except images.ImageError as exc:
            raise UsageError(str(exc)) from None
    return limits


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


def simple_options(args: argparse.Namespace, target: str | None) -> dict[str, object]:
    """Options fields of the variables that need no rule of their own (a `field` and a `kind`
    in bench/core/variables.py): each validated by its kind; unset ones keep Options' default."""
    values: dict[str, object] = {}
    for variable in VARIABLES:
        raw = getattr(args, variable.dest, None)
        if variable.field is None or raw is None or not str(raw).strip():
            continue
        if variable.local is not None and target is not None:
            raise UsageError(f"{variable.name} {variable.local}: not with TARGET=")
        name = variable.name.lower()
        kind = {"int": validate_int, "switch": validate_switch}[str(variable.kind)]
        values[variable.field] = kind(name, raw)
    return values


def validate_precision(args: argparse.Namespace) -> dict[str, object]:
    """TRIALS and BUDGET: the fixed trial count, or TRIALS=auto's first rounds and its
    Precision (make bench only: a capacity search and a soak have rounds of their own)."""
    trials, minutes = validate_trials(args.trials, getattr(args, "trials_budget", None))
    if trials is not None:
        return {"trials": trials}
    if getattr(args, "command", "run") != "run":
        raise UsageError(
            f"TRIALS=auto applies to make bench; valid here: TRIALS=<1..{defaults.AUTO_MAX_TRIALS}>"
        )
    budget = minutes if minutes is not None else defaults.AUTO_BUDGET_MIN
    auto = plan.Precision(budget_s=budget * 60)
    return {"trials": auto.min_trials, "precision": auto}


def options_from(args: argparse.Namespace) -> plan.Options:
    """Validate every run option; raise UsageError on the first bad one."""
    load_all()  # a broken declaration is bad input too: refuse before anything starts
    servers = validate_choices("server", args.server, server_ids(), allow_all=True)
    load = validate_load(args, validate_app(args))
    proxy = validate_proxy(args)
    pin = validate_switch("pin", args.pin)
    if pin and len(os.sched_getaffinity(0)) < 2:
        raise UsageError("PIN=1 needs at least 2 usable CPUs; this process may use 1")
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
        arch=arch,
        results=validate_results(args.results),
        overrides=overrides,
        load_threads=load_threads or default_load_threads(),
        seed=seed,
        pin=pin,
        **validate_runtime(args, servers, arch, proxy["target"]),  # type: ignore[arg-type]
        cpu_quota=validate_cpu_quota(args.cpu_quota, proxy["target"]),  # type: ignore[arg-type]
        lifecycle=validate_lifecycle(args.lifecycle, load, proxy["target"]),  # type: ignore[arg-type]
        **simple_options(args, proxy["target"]),  # type: ignore[arg-type]
        **validate_precision(args),  # type: ignore[arg-type]
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
    mode = dataclasses.replace(options.mode, objective=objective)
    return dataclasses.replace(options, rates=(objective.start_rps,), mode=mode)


def check_serve(options: plan.Options) -> None:
    """make serve: exactly one server, started here."""
    if len(options.servers) != 1:
        raise UsageError(f"make serve starts one server; valid SERVER: {', '.join(server_ids())}")
    if options.target is not None:
        raise UsageError("make serve starts the server here; TARGET applies to make bench only")


def with_app(options: plan.Options) -> plan.Options:
    """APP=: the app imported in its environments before anything starts (its kind detected
    where APP_KIND does not say it); a requirement that does not resolve, an import error or
    a callable that is neither WSGI nor ASGI is bad input."""
    from bench.host.appenv import AppEnvError, resolve_app

    if options.app is None:
        return options
    if options.arch != host_arch():
        raise UsageError(f"APP runs natively only: ARCH={options.arch} would emulate it")
    specs = load_all()
    try:
        app = resolve_app(
            options.app,
            [specs[s] for s in options.servers],
            lambda text: print(f"bench: {text}", file=sys.stderr),
        )
    except AppEnvError as exc:
        raise UsageError(str(exc)) from None
    return dataclasses.replace(options, app=app)


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
    mode = dataclasses.replace(options.mode, soak_interval_s=float(interval))
    return dataclasses.replace(options, mode=mode)


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


def do_images(args: argparse.Namespace) -> int:
    """`make images`: the base, then each server's image; 1 when one failed."""
    from bench.host import images
    from bench.host.state import state_base

    servers = validate_choices("server", args.server, server_ids(), allow_all=True)
    try:
        arch = normalize_arch(args.arch) if args.arch else host_arch()
    except ArchError as exc:
        raise UsageError(str(exc)) from None
    problem = images.arch_problem(arch, host_arch())
    if problem is not None:
        raise UsageError(problem)
    specs = load_all()
    skipped = [s for s in servers if images.not_buildable(specs[s])]
    if skipped and args.server.strip() != "all":
        raise UsageError(images.not_buildable(specs[skipped[0]]) or "")
    wanted = [specs[s] for s in servers if s not in skipped]
    log = state_base() / "images.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    print(f"images: building {', '.join(s.id for s in wanted)} (log: {log})", file=sys.stderr)
    try:
        built = images.build_images(
            wanted, arch, lambda text: print(f"images: {text}", file=sys.stderr, flush=True), log
        )
    except images.ImageError as exc:
        print(f"images: {exc}", file=sys.stderr)
        return 1
    return 0 if all(built.values()) else 1


def study_names() -> list[str]:
    """Every study NAME= takes (studies/)."""
    from bench.studies.schema import study_names as declared

    return declared()


def do_help(args: argparse.Namespace) -> int:
    """`make help`'s variables, scenarios, studies and servers, from their declarations."""
    lines = ["Variables (make bench VAR=value ...):", *help_lines({"LOAD": default_name()}), ""]
    lines.append("Scenarios (SCENARIO=; the load tools that drive each):")
    width = max(map(len, scenario.SCENARIOS))
    for item in scenario.SCENARIOS.values():
        drivers = [n for n in load_names() if item.name in scenarios_for(n)]
        lines.append(f"  {item.name:<{width}}  {item.about} ({', '.join(drivers)})")
    lines += ["", f"Studies (NAME=): {' '.join(study_names())} all", ""]
    lines.append(f"Servers (SERVER=): {' '.join(server_ids())}")
    print("\n".join(lines))
    return 0


def do_variables(args: argparse.Namespace) -> int:
    """NAME:option of every variable the Makefile passes to a command, for its `vars`."""
    print(" ".join(f"{v.name}:{v.option[2:]}" for v in for_command(args.of)))
    return 0


def do_report(args: argparse.Namespace) -> int:
    """`make report`: summary.md rebuilt from the records in RESULTS."""
    from bench.report import summary as report

    results = validate_results(args.results)
    try:
        path = report.write_summary(results, _sections(results))
    except OSError as exc:
        raise UsageError(f"RESULTS={args.results!r}: {_os_problem(exc)}") from None
    print(f"wrote {path}")
    return 0


def do_compare(args: argparse.Namespace) -> int:
    """`make compare`: BASE and HEAD side by side on stdout."""
    return _compare(args.base, args.head)


def do_study(args: argparse.Namespace) -> int:
    """`make study`: the named studies (bench/studies), namespace ones and common ones."""
    from bench.studies import runner

    names = study_names_from(args.name)
    return runner.run(
        names,
        validate_results(args.results),
        validate_int("duration", args.duration) if args.duration else None,
        validate_int("seed", args.seed) if args.seed else random.randrange(2**31),
        skip_unrunnable=args.name.strip() == "all",
        arms=study_arms_from(args.arms, names),
    )


def do_run(args: argparse.Namespace) -> int:
    """`make bench`: verify and measure; 0 all runs ok, 1 some failed."""
    return _execute(with_app(options_from(args)))


def do_serve(args: argparse.Namespace) -> int:
    """`make serve`: one verified server up until Ctrl-C."""
    from bench.harness import serve

    options = options_from(args)
    check_serve(options)
    return serve.serve(with_app(options))


def do_capacity(args: argparse.Namespace) -> int:
    """`make capacity`: each server's highest rate within the objective."""
    check_open_loop(args.load)
    if args.rate is None:
        args.rate = str(defaults.CAPACITY_START_RPS)  # where the search starts
    options = options_from(args)
    if options.lifecycle or options.recycle:
        raise UsageError(
            "make capacity searches a steady server's rate: LIFECYCLE and RECYCLE "
            "apply to make bench, make soak and studies"
        )
    return _execute(with_app(with_objective(options, args)))


def do_soak(args: argparse.Namespace) -> int:
    """`make soak`: memory of every server process over a long fixed-rate run."""
    return _execute(with_app(with_soak(options_from(args), args.interval)))


def noise_design(options: plan.Options, args: argparse.Namespace) -> Design:
    """make noise: one server, scenario and concurrency, started here and measured closed
    loop at a fixed number of runs; ROUNDS, STARTS, RUNS: the nested design."""
    from bench.harness.nested import Design

    for name, values in (
        ("SERVER", options.servers),
        ("SCENARIO", options.scenarios),
        ("CONCURRENCY", options.concurrency),
    ):
        if len(values) != 1:
            raise UsageError(
                f"make noise measures one {name}; valid: one of {', '.join(map(str, values))}"
            )
    if options.rates:
        raise UsageError("make noise measures closed-loop req/s: RATE applies to make bench")
    if options.target is not None:
        raise UsageError("make noise starts the server here, again and again: not with TARGET=")
    if options.lifecycle or options.recycle:
        raise UsageError(
            "make noise measures a steady server: LIFECYCLE and RECYCLE apply to make bench"
        )
    return Design(
        validate_int("rounds", args.rounds),
        validate_int("starts", args.starts),
        validate_int("runs", args.runs),
    )


def do_noise(args: argparse.Namespace) -> int:
    """`make noise`: the design run, then its variance components and A/A verdict on stdout."""
    from bench.core.record import load_records
    from bench.harness import nested
    from bench.report import variance

    options = options_from(args)
    design = noise_design(options, args)
    status, noise_id = nested.execute(options, design, _sections(options.results))
    records, _ = load_records(options.results)
    runs = [n for n in variance.noise_runs(records) if n.meta.get("id") == noise_id]
    if runs:
        print(
            "\n".join(
                [
                    "This machine's noise",
                    "",
                    *variance.short_lines(variance.findings(runs[0])),
                    f"Details: {options.results / 'details' / variance.DETAILS_FILE}",
                ]
            )
        )
    return status


def _execute(options: plan.Options) -> int:
    from bench.harness import run

    return run.execute(options, _sections(options.results))


# subcommand -> handler; each returns the exit status or raises UsageError (exit 2).
COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "run": do_run,
    "capacity": do_capacity,
    "serve": do_serve,
    "soak": do_soak,
    "noise": do_noise,
    "report": do_report,
    "compare": do_compare,
    "study": do_study,
    "help": do_help,
    "variables": do_variables,
    "images": do_images,
    "export": lambda args: export_points(args.format, args.results),
}
# Commands that only print what is declared: no leftover namespaces removed, no MACHINE check.
DECLARATIVE = ("help", "variables")


def export_points(raw_format: str | None, raw_results: str) -> int:
    """`make export`: every point of RESULTS as CSV or JSON on stdout (bench.report.export)."""
    from bench.core.record import load_records
    from bench.report import export

    valid = ", ".join(export.FORMATS)
    if not raw_format:
        raise UsageError(f"FORMAT is required; valid: {valid}")
    fmt = validate_choice("format", raw_format, tuple(export.FORMATS))
    results = Path(raw_results)
    if not results.is_dir():
        raise UsageError(f"RESULTS={raw_results!r} is not a directory of results")
    records, problems = load_records(results, os.environ.get("PYWEBBENCH_REFERENCE") == "1")
    for problem in problems:
        print(f"export: {problem}", file=sys.stderr)
    if not records:
        raise UsageError(f"RESULTS={raw_results!r} holds no records to export")
    sys.stdout.write(export.export(records, fmt))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of `python -m bench`."""
    from bench.host import netns

    try:
        args = build_parser().parse_args(argv)
        if args.command not in DECLARATIVE:
            # Namespaces a killed harness left behind (its pid gone) go at the next start.
            for name in netns.remove_leftovers():
                print(
                    f"bench: removed network namespace {name} left by a harness that died",
                    file=sys.stderr,
                )
            from bench.host import docker

            # Containers and networks of a killed harness (owner label, pid gone) likewise.
            for name in docker.remove_leftovers():
                print(f"bench: removed {name} left by a harness that died", file=sys.stderr)
            try:
                machine_label()  # MACHINE=, checked before anything starts
            except ValueError as exc:
                raise UsageError(str(exc)) from None
        return COMMANDS[args.command](args)
    except (UsageError, DeclarationError, StudyError) as exc:
        print(f"bench: {exc}", file=sys.stderr)
        return 2
