"""Validation: the parsed options of a command -> plan.Options, or UsageError in one line.

Input: the Namespace of bench.cli.parser. Output: plan.Options (and make capacity's objective,
make soak's interval, make study's names and arms). Values are parsed by their declaration
(bench/core/variables.py); here the rules that need the harness's own knowledge (a load tool's
scenarios, the CPUs this process may use, an emulator). Nothing here asks Docker: an engine
or an image is checked by the command that needs it (bench.cli.commands.docker_ready).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import random
import sys
from typing import TYPE_CHECKING

from bench.cli.parser import build_parser, declared_check
from bench.core import defaults, plan, variables
from bench.core.app import AppError, AppSpec, parse_app
from bench.core.protocol import HTTP1, PROTOCOLS
from bench.core.pythons import parse_python
from bench.core.registry import (
    OVERRIDABLE,
    load_all,
    protocol_refusal,
    python_refusal,
    server_ids,
)
from bench.core.validate import (
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
from bench.core.variables import VARIABLES
from bench.host.arch import ArchError, check_emulation_supported, host_arch, normalize_arch
from bench.load import (
    default_for,
    default_load_threads,
    scenarios_for,
    tools,
)
from bench.load import names as load_names
from bench.studies.schema import load_study

if TYPE_CHECKING:
    from bench.harness.nested import Design


def study_names() -> list[str]:
    """Every study NAME= takes (studies/)."""
    from bench.studies.schema import study_names as declared

    return declared()


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
    if not raw:  # APP_ROUTES & co. without APP: refused by their declared rules
        return None
    try:
        return parse_app(raw, args.app_routes, args.app_requirements, args.app_kind)
    except AppError as exc:
        raise UsageError(str(exc)) from None


def validate_load(args: argparse.Namespace, app: AppSpec | None = None) -> dict[str, object]:
    """LOAD, SCENARIO and the load tool's own variables, checked against what the tool takes."""
    named = [s.strip() for s in (args.scenario or "").split(",") if s.strip()]
    load_tool = validate_choice("load", args.load or default_for(named), load_names())
    app_scenario = args.scenario
    if app is not None:  # (APP with a tool that plays a mix: refused by APP's declared rule)
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
    # LOCUST_WORKERS, RATE and LOAD together: their declared rules (bench/core/variables.py)
    locust_workers = validate_int("locust_workers", args.locust_workers)
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
    # UPSTREAM_KEEPALIVE without a proxy, off behind an ALB, a proxy with TARGET: declared rules
    upstream_keepalive = (
        validate_switch("upstream_keepalive", args.upstream_keepalive)
        if args.upstream_keepalive is not None
        else keepalive
    )
    if proxy == "alb":
        upstream_keepalive = True  # a cloud balancer has no switch for it
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
    """NETWORK: the server container's network (bridge needs RUNTIME=docker and no PROXY=:
    declared rules)."""
    return validate_choice("network", getattr(args, "network", None), plan.NETWORKS)


def validate_runtime(args: argparse.Namespace) -> dict[str, object]:
    """RUNTIME, CPUS and MEMORY: the container's limits in docker's own syntax (the rules
    between them and other variables are declared in bench/core/variables.py; the engine and
    the images are checked by the command that starts containers: docker_ready)."""
    runtime = validate_choice("runtime", args.runtime, plan.RUNTIMES)
    network = validate_network(args, runtime)
    if runtime != "docker":
        return {"mode": plan.Mode(runtime=runtime)}
    limits: dict[str, object] = {"mode": plan.Mode(runtime=runtime), "network": network}
    if (args.cpus or "").strip():
        limits["cpus"] = validate_cpus(args.cpus)
    if (args.memory or "").strip():
        limits["memory_bytes"] = validate_memory(args.memory)
    return limits


def docker_ready(options: plan.Options) -> None:
    """RUNTIME=docker: an engine that answers and each server's current image, for this
    arch and PYTHON=; UsageError naming the command that fixes it (make images SERVER=<id>
    [PYTHON=<name>])."""
    if options.mode.runtime != "docker":
        return
    from bench.host import docker, images

    problem = images.arch_problem(options.arch, host_arch()) or docker.engine_problem()
    if problem is not None:
        raise UsageError(problem)
    specs = load_all()
    for server in options.servers:
        try:
            images.image_for(specs[server], options.arch, options.python)
        except images.ImageError as exc:
            raise UsageError(str(exc)) from None


def validate_lifecycle(raw: str | None, load: dict[str, object], target: str | None) -> str | None:
    """LIFECYCLE: an event in the middle of each measured window, at a fixed arrival rate."""
    if raw is None or not raw.strip():
        return None
    from bench.observe.lifecycle import EVENTS

    # an open-loop LOAD with RATE, and no TARGET: LIFECYCLE's declared rules
    return validate_choice("lifecycle", raw, EVENTS)


def validate_protocol(args: argparse.Namespace, servers: tuple[str, ...]) -> str:
    """PROTOCOL: one of bench.core.protocol's, spoken by every server asked for."""
    name = validate_choice("protocol", getattr(args, "protocol", None) or HTTP1, tuple(PROTOCOLS))
    refusal = protocol_refusal(load_all(), servers, name)
    if refusal is not None:
        raise UsageError(refusal)
    return name


def validate_python(args: argparse.Namespace, servers: tuple[str, ...], arch: str) -> str | None:
    """PYTHON: one of bench.core.pythons' names (None: unset, the usual python3), which every
    server asked for declares ([pythons] in its server.toml), on the host's own arch."""
    raw = getattr(args, "python", None)
    if raw is None or not str(raw).strip():
        return None
    name = parse_python(str(raw))
    refusal = python_refusal(load_all(), servers, name)
    if refusal is not None:
        raise UsageError(refusal)
    if arch != host_arch():
        raise UsageError(
            f"PYTHON={name} is built for this host's arch; valid with it: ARCH={host_arch()}"
        )
    return name


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
    Precision (make bench, tune and capacity: a soak has rounds of its own)."""
    trials, minutes = validate_trials(args.trials, getattr(args, "trials_budget", None))
    if trials is not None:
        return {"trials": trials}
    if getattr(args, "command", "run") not in ("run", "tune", "capacity"):
        raise UsageError(
            f"TRIALS=auto applies to make bench; valid here: TRIALS=<1..{defaults.AUTO_MAX_TRIALS}>"
        )
    budget = minutes if minutes is not None else defaults.AUTO_BUDGET_MIN
    auto = plan.Precision(budget_s=budget * 60)
    return {"trials": auto.min_trials, "precision": auto}


def study_rounds(args: argparse.Namespace) -> int | plan.Precision | None:
    """make study's TRIALS: None (the study file's trials), a fixed number of rounds, or
    TRIALS=auto's Precision (BUDGET minutes, MARGIN): rounds until every check is decided."""
    raw = getattr(args, "trials", None)
    budget = getattr(args, "trials_budget", None)
    if raw is None or not str(raw).strip():
        return None  # BUDGET without TRIALS=auto: the tuned arms' searches (study_tune_budget)
    trials, minutes = validate_trials(str(raw), budget)
    if trials is not None:
        return trials
    margin = variables.parse_margin(getattr(args, "margin", None) or str(defaults.AUTO_MARGIN_PCT))
    return plan.Precision(
        budget_s=(minutes or defaults.AUTO_BUDGET_MIN) * 60,
        margin=margin,  # type: ignore[arg-type]
    )


def study_tune_budget(args: argparse.Namespace) -> int | None:
    """make study's BUDGET without TRIALS: the minutes of each tuned arm's search (None: not
    given, or TRIALS=auto's, the race's; then each study's [tune] budget)."""
    raw = str(getattr(args, "trials", None) or "").strip()
    budget = str(getattr(args, "trials_budget", None) or "").strip()
    if not budget or raw.lower() == "auto":
        return None
    if raw:
        raise UsageError(
            f"BUDGET={budget} with TRIALS={raw}: BUDGET bounds TRIALS=auto's rounds or, without "
            "TRIALS, the tuned arms' searches; valid: TRIALS=auto, or no TRIALS"
        )
    return validate_int("budget", budget)


def race_duration(args: argparse.Namespace, options: plan.Options) -> plan.Options:
    """TRIALS=auto without DURATION: trials of defaults.RACE_DURATION_S (rounds decide a race,
    not the length of a trial). A DURATION the user set, even to the default, is kept."""
    given = getattr(args, "given_names", None)
    if given is None:  # argv, not make: set means different from the default
        given = {"DURATION"} if str(args.duration) != str(defaults.DURATION_S) else set()
    if (
        options.precision is None
        or "DURATION" in given
        or getattr(args, "command", "run") == "capacity"
    ):
        return options  # make capacity: its steps' own DURATION (defaults.CAPACITY_DURATION_S)
    return dataclasses.replace(options, duration_s=defaults.RACE_DURATION_S)


def options_from(args: argparse.Namespace) -> plan.Options:
    """Validate every run option; raise UsageError on the first bad one."""
    declared_check(args)  # the declaration's parsers and rules, as the pre-check ran them
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
    options = plan.Options(
        servers=servers,
        arch=arch,
        results=validate_results(args.results),
        overrides=overrides,
        load_threads=load_threads or default_load_threads(),
        seed=seed,
        pin=pin,
        **validate_runtime(args),  # type: ignore[arg-type]
        cpu_quota=validate_cpu_quota(args.cpu_quota, proxy["target"]),  # type: ignore[arg-type]
        lifecycle=validate_lifecycle(args.lifecycle, load, proxy["target"]),  # type: ignore[arg-type]
        margin=variables.parse_margin(getattr(args, "margin", None) or "5"),
        wait=validate_switch("wait", getattr(args, "wait", None) or "1"),
        protocol=validate_protocol(args, servers),
        app_flavor=str(
            variables.BY_NAME["APP_FLAVOR"].parse(getattr(args, "app_flavor", None) or "framework")
        ),
        python=validate_python(args, servers, arch),
        **simple_options(args, proxy["target"]),  # type: ignore[arg-type]
        **validate_precision(args),  # type: ignore[arg-type]
        **load,  # type: ignore[arg-type]
        **proxy,  # type: ignore[arg-type]
    )
    return race_duration(args, options)


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
    """make soak: RSS sampled every SOAK_INTERVAL seconds (one rate, a local server and 3
    samples in DURATION at least: make soak's declared command rules)."""
    interval = validate_int("soak_interval", raw_interval)
    mode = dataclasses.replace(options.mode, soak_interval_s=float(interval))
    return dataclasses.replace(options, mode=mode)


def noise_options(args: argparse.Namespace) -> tuple[plan.Options, Design]:
    """make noise's variables -> the run options (every other run variable at its default:
    one server, scenario and concurrency, closed loop, started here; make noise's declared
    command rules) and the nested design (ROUNDS, STARTS, RUNS)."""
    from bench.harness.nested import Design

    run = argparse.Namespace(**{**vars(build_parser().parse_args(["run"])), **vars(args)})
    options = options_from(run)
    design = Design(
        validate_int("rounds", args.rounds),
        validate_int("starts", args.starts),
        validate_int("runs", args.runs),
    )
    return options, design


def tune_options(args: argparse.Namespace) -> tuple[plan.Options, dict | None, str]:
    """make tune's variables -> the run options (TRIALS=auto: its BUDGET and MARGIN; every
    other run variable at its default; make tune's declared command rules), KNOBS parsed
    (None: each server.toml's tune lists) and the objective."""
    run = argparse.Namespace(**{**vars(build_parser().parse_args(["run"])), **vars(args)})
    options = options_from(run)
    knobs = variables.parse_knobs(args.knobs) if args.knobs else None
    objective = variables.BY_NAME["OBJECTIVE"].parse(args.objective)
    return options, knobs, str(objective)


def with_tuned(options: plan.Options, raw: str | None) -> plan.Options:
    """make bench: each server's tuned configuration for this machine, point and runtime
    (bench.report.tuned), unless TUNED=0, a knob is set by hand, or the plan holds more
    than one scenario or concurrency (a tuned configuration holds for one point)."""
    from bench.host.metadata import host_metadata
    from bench.report import tuned

    one_point = len(options.scenarios) == 1 and len(options.concurrency) == 1
    wanted = validate_switch("tuned", raw or "1") and not options.overrides
    # APP_FLAVOR=raw: make tune's answers are the framework app's (tune refuses raw)
    raw = options.app_flavor != "framework"
    if not wanted or options.target or options.rates or options.app or raw or not one_point:
        return options
    host, found = host_metadata(), {}
    for server in options.servers:
        hit = tuned.find(
            options.results,
            host,
            server,
            options.scenarios[0],
            options.concurrency[0],
            tuned.runtime_of(options),
        )
        if hit is not None:
            path, knobs = hit
            found[server] = (str(path.relative_to(options.results)), knobs)
            print(f"bench: {server}: tuned {knobs} ({path}; TUNED=0: declared)", file=sys.stderr)
    return dataclasses.replace(options, tuned=found)


def overhead_options(args: argparse.Namespace) -> tuple[plan.Options, int, bool]:
    """make overhead's variables -> the run options (every other run variable at its
    default), its rounds and whether the legacy observer is measured too."""
    run = argparse.Namespace(**{**vars(build_parser().parse_args(["run"])), **vars(args)})
    options = options_from(run)
    rounds = validate_int("rounds", args.rounds)
    return options, rounds, validate_switch("legacy", args.legacy)
