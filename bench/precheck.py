"""Bad input refused before anything is installed: `python3 -m bench.precheck <command>`.

Input: the make variables, read from the environment make exports them in (never from a
command line a shell parsed), PYWEBBENCH_CMDLINE (the names given on make's command line, by
the Makefile), and the declarations on disk (servers/, studies/, bench/load's source). Output:
exit status 0, or one line naming the valid choices and exit status 2. Runs with the system's
python3 and the standard library only, so every refusal comes in well under a second on a
fresh clone instead of after apt, uv and a cargo build of oha. Every value is parsed by its
declaration (bench/core/variables.py), the rules between variables come from there too; here
only what needs the files: study files, APP's, the result directories, a plan no server can
serve. The harness runs the same declaration again (bench/cli), with the rules that need
what set-up installs (Docker's engine, cgroups, an emulator).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

from bench.core import defaults, scenario, variables
from bench.core.app import AppError, parse_app
from bench.core.campaign import load_campaign
from bench.core.record import REFERENCE_DIR, load_records
from bench.core.registry import (
    ROOT,
    SCENARIO_PROTOCOLS,
    DeclarationError,
    load_all,
    protocol_refusal,
    python_refusal,
)
from bench.core.studyfile import StudyError, check_study, study_path
from bench.core.validate import UsageError, validate_choices
from bench.host import ssh
from bench.report import inputs

# The names given on make's command line (the Makefile sets it from $(origin)).
CMDLINE_ENV = "PYWEBBENCH_CMDLINE"
# The targets make was asked for (the Makefile sets it from MAKECMDGOALS; none: make help).
GOALS_ENV = "PYWEBBENCH_GOALS"
NOISE, TUNE, REMOTE = variables.NOISE, variables.TUNE, variables.REMOTE
NONE = "none"  # a target that runs no harness command: its variables are still checked


def load_names() -> list[str]:
    """The names LOAD= takes (read from bench/load's source: importing it needs psutil)."""
    return sorted(variables.load_names())


def check_command_line(names: list[str]) -> None:
    """Every variable on make's command line is declared: "SERVERS is not a variable; did you
    mean SERVER?" (a misspelling must not start a default 15-minute bench)."""
    for name in names:
        problem = variables.unknown_variable(name)
        if problem is not None:
            raise UsageError(problem)


def check_studies(given: Mapping[str, str], values: Mapping[str, object]) -> None:
    """NAME's study files against their static schema, and ARMS against their arms."""
    names = values.get("NAME") or ()
    arms: list[str] = []
    tuned: list[str] = []
    for name in names:  # type: ignore[union-attr]
        data = check_study(study_path(name))
        arms += [str(arm["id"]) for arm in data["arm"]]
        tuned += [name for arm in data["arm"] if arm.get("tune")]
        for arm in data["arm"]:  # a tuned arm's space: KNOBS='s bounds (issue 58 item 2)
            if isinstance(arm.get("tune"), dict):
                space = " ".join(f"{k}={','.join(map(str, v))}" for k, v in arm["tune"].items())
                try:
                    variables.parse_knobs(space)
                except UsageError as exc:
                    raise UsageError(f"{name}: arm {arm['id']}: {exc}") from None
    # without TRIALS=auto, BUDGET bounds the tuned arms' searches: none, and it would be dropped
    auto = given.get("TRIALS", "").strip().lower() == "auto"
    if names and given.get("BUDGET", "").strip() and not auto and not tuned:
        with_tune = [n for n in variables.study_names() if _has_tuned_arm(n)]
        raise UsageError(
            f"BUDGET: NAME={given.get('NAME', '').strip()} has no tuned arm (tune = ... in its "
            f"file) and TRIALS is not auto: nothing it would bound; it applies to TRIALS=auto "
            f"or a study with a tuned arm ({', '.join(with_tune)})"
        )
    raw = given.get("ARMS", "").strip()
    if raw and raw != "all" and names:
        validate_choices("arms", raw, list(dict.fromkeys(arms)), allow_all=False)


def _has_tuned_arm(name: str) -> bool:
    """Whether study `name` has an arm with a search space (`tune = ...`)."""
    return any(arm.get("tune") for arm in check_study(study_path(name))["arm"])


def check_app(given: Mapping[str, str]) -> None:
    """APP and its files, read statically: the entries parse, the files exist, the routes
    are declared; SCENARIO names the app's routes (nothing imported: set-up builds the
    environments the app is imported in)."""
    if not given.get("APP", "").strip():
        return
    try:
        app = parse_app(
            given["APP"],
            given.get("APP_ROUTES") or None,
            given.get("APP_REQUIREMENTS") or None,
            given.get("APP_KIND") or None,
        )
    except AppError as exc:
        raise UsageError(str(exc)) from None
    routes = [r.name for r in app.loaded_routes]
    validate_choices("scenario", given.get("SCENARIO") or "all", routes, allow_all=True)


def _has_records(path: Path) -> bool:
    """A result set: records in `path/records/` (the harness writes them there)."""
    return (path / "records").is_dir() and any((path / "records").glob("*.json"))


# The commands that write records into RESULTS: never into the checkout's shipped reference
# (make reference alone writes there, through its campaign, which runs no pre-check).
WRITING = ("run", "capacity", "study", TUNE, NOISE, "soak", REMOTE, "serve")


def check_shipped(command: str, given: Mapping[str, str]) -> None:
    """A writing command's RESULTS is not the checkout's shipped records (results/reference
    and anything below it); reading them (make report, compare, export) stays allowed."""
    results = given.get("RESULTS", "").strip()
    if command not in WRITING or not results:
        return
    shipped = ROOT / defaults.RESULTS / REFERENCE_DIR
    if Path(results).resolve().is_relative_to(shipped.resolve()):
        raise UsageError(
            f"RESULTS={results!r} is the checkout's shipped reference ({shipped.relative_to(ROOT)}"
            "), written only by make reference; give a directory of your own, e.g. RESULTS=results"
        )


def check_directories(command: str, given: Mapping[str, str]) -> None:
    """make report's and export's RESULTS must exist; compare's BASE and HEAD must be two
    result sets; a writing command's RESULTS is not the shipped reference."""
    check_shipped(command, given)
    results = given.get("RESULTS", "")
    if command in ("report", "export") and results and not Path(results).is_dir():
        raise UsageError(f"RESULTS={results!r} does not exist; nothing to {command}")
    if command == "report":  # a fresh clone: said before set-up installs anything
        inputs.require_record_files(results or defaults.RESULTS, given)
        # and records that are empty or do not parse, read as the report reads them
        reference = "1" in (given.get("REFERENCE"), os.environ.get("PYWEBBENCH_REFERENCE"))
        found, problems = load_records(Path(results or defaults.RESULTS), reference)
        inputs.require_records("RESULTS", results or defaults.RESULTS, found, problems)
    if command == "export":
        inputs.result_set("RESULTS", results or defaults.RESULTS, purpose="export")
    if command != "compare":
        return
    for side in ("BASE", "HEAD"):
        if not Path(given[side]).is_dir() or not _has_records(Path(given[side])):
            raise UsageError(f"{side}={given[side]!r} holds no records (<dir>/records/*.json)")
    if Path(given["BASE"]).resolve() == Path(given["HEAD"]).resolve():
        raise UsageError("BASE and HEAD are the same directory: compare two result sets")
    inputs.result_set("BASE", given["BASE"], given["HEAD"])
    inputs.result_set("HEAD", given["HEAD"], given["BASE"])


def check_plan(command: str, given: Mapping[str, str], values: Mapping[str, object]) -> None:
    """A plan in which something can run: a scenario the load tool drives, and a server that
    serves one of the scenarios (SERVER=nginx-static SCENARIO=db holds nothing)."""
    planned = ("run", "capacity", "soak", "serve", "overhead", "noise", "tune")
    if command not in planned or given.get("APP"):
        return
    scenarios = values.get("SCENARIO")
    load = str(values.get("LOAD") or variables.default_load(values.get("SCENARIO") or ()))  # type: ignore[arg-type]
    drives = variables.load_tools()[load].get("drives")
    drivable = scenario.needing(str(drives)) if drives else tuple(scenario.SCENARIOS)
    if scenarios is None:
        return  # the harness picks the tool's drivable defaults
    wrong = [s for s in scenarios if s not in drivable]  # type: ignore[union-attr]
    if wrong and given.get("SCENARIO", "").strip() != "all":
        raise UsageError(
            f"SCENARIO={','.join(wrong)} cannot run with LOAD={load}; valid with it: "
            f"{', '.join(drivable)}"
        )
    specs = load_all()
    wanted = [s for s in scenarios if s in drivable]  # type: ignore[union-attr]
    servers = values.get("SERVER") or ()
    serving = [
        s
        for s in servers  # type: ignore[union-attr]
        if specs[s].scenarios is None or set(wanted) & set(specs[s].scenarios or ())
    ]
    if not serving:
        offered = sorted({x for s in servers for x in (specs[s].scenarios or ())})  # type: ignore[union-attr]
        raise UsageError(
            f"no server of SERVER={given.get('SERVER') or ','.join(servers)} serves "  # type: ignore[arg-type]
            f"SCENARIO={','.join(wanted)}: nothing would run; valid: SCENARIO="
            f"{','.join(offered)}, or a server that serves it"
        )
    check_speaking(given, serving, wanted)


def check_speaking(given: Mapping[str, str], servers: list[str], wanted: list[str]) -> None:
    """A plan of scenarios that need a protocol (WebSocket) has a server that speaks it:
    else every run would be recorded "unsupported" and nothing measured."""
    specs = load_all()
    needs = {s: scenario.SCENARIOS[s].needs for s in wanted if s in scenario.SCENARIOS}
    carried = {s: n for s, n in needs.items() if n in SCENARIO_PROTOCOLS}
    if not wanted or len(carried) != len(wanted):
        return  # a scenario of plain HTTP runs on every server that serves it
    protocols = sorted(set(carried.values()))
    if any(specs[s].speaks(p) for s in servers for p in protocols):
        return
    able = [s for s, spec in specs.items() if any(spec.speaks(p) for p in protocols)]
    first = servers[0]
    raise UsageError(
        f"no server of SERVER={given.get('SERVER', '').strip() or ','.join(servers)} speaks "
        f"{'/'.join(protocols)} (SCENARIO={','.join(wanted)}): nothing would run ({first}: "
        f"{specs[first].why_not(protocols[0])}); valid: SERVER={','.join(able)}"
    )


def check_protocol(command: str, values: Mapping[str, object]) -> None:
    """Every server of SERVER speaks PROTOCOL, as its server.toml declares ([protocols])."""
    name = values.get("PROTOCOL")
    if command not in ("run", "capacity", "soak", "serve") or not isinstance(name, str):
        return
    refusal = protocol_refusal(load_all(), values.get("SERVER") or (), name)  # type: ignore[arg-type]
    if refusal is not None:
        raise UsageError(refusal)


def check_python(command: str, given: Mapping[str, str], values: Mapping[str, object]) -> None:
    """Every server of SERVER runs on PYTHON, as its server.toml declares ([pythons]); make
    images SERVER=all PYTHON= builds those that do (and says which it leaves out)."""
    name = values.get("PYTHON")
    commands = ("run", "capacity", "soak", "serve", "tune", "images")
    if command not in commands or not isinstance(name, str):
        return
    if command == "images" and given.get("SERVER", "").strip() == "all":
        return
    refusal = python_refusal(load_all(), values.get("SERVER") or (), name)  # type: ignore[arg-type]
    if refusal is not None:
        raise UsageError(refusal)


def check_taken(cmdline: list[str], goals: list[str]) -> None:
    """Every variable on make's command line is taken by one of the make targets named
    (`goals`): `make bench HOST=...` is refused, never a local bench. Only the command line:
    a user's shell may hold NAME= or ARCH= for its own reasons."""
    for name in cmdline:
        problem = variables.not_taken(name, goals)
        if problem is not None:
            raise UsageError(problem)


def check_python_arch(command: str, values: Mapping[str, object]) -> None:
    """PYTHON= builds CPython for this host's arch only: with a foreign ARCH it is refused
    here, not after apt installs an emulator and the build takes 11 minutes (make remote:
    ARCH is the other machine's, checked there)."""
    name, arch = values.get("PYTHON"), values.get("ARCH")
    if command == REMOTE or not isinstance(name, str) or not isinstance(arch, str):
        return
    host = variables.host_arch()
    if arch != host:
        raise UsageError(f"PYTHON={name} is built for this host's arch; valid with it: ARCH={host}")


def check(
    command: str,
    env: Mapping[str, str],
    cmdline: list[str] | None = None,
    goals: list[str] | None = None,
) -> None:
    """Everything about `command`'s variables that can be known before set-up (`goals`: the
    make targets named, for what they take); UsageError on the first problem."""
    check_command_line(cmdline or [])
    given = {name: env[name] for name in variables.BY_NAME if name in env}
    for name in cmdline or []:  # on the command line: parsed whatever the command takes
        if name in variables.BY_NAME:
            variables.BY_NAME[name].parse(given.get(name, ""))
    if command == NONE:
        check_taken(cmdline or [], goals or [])
        return
    values = variables.check(command, given)
    check_taken(cmdline or [], goals or [])  # before the files and ssh: the command line says it
    check_studies(given, values)
    check_app(given)
    check_directories(command, given)
    check_plan("run" if command == variables.REMOTE else command, given, values)
    check_protocol("run" if command == variables.REMOTE else command, values)
    check_python("run" if command == variables.REMOTE else command, given, values)
    check_python_arch(command, values)
    check_host(command, given)
    if command == variables.REFERENCE:
        load_campaign()  # every question's variables, as make would parse them


def check_host(command: str, given: Mapping[str, str]) -> None:
    """make remote's HOST: ssh reaches it without a prompt, and it has what make bench
    needs before its own set-up (bench.host.ssh.probe); said before anything starts."""
    if command != variables.REMOTE:
        return
    problem = ssh.probe(given["HOST"].strip())
    if problem is not None:
        raise UsageError(f"HOST={given['HOST'].strip()}: {problem}")


def main(argv: list[str] | None = None) -> int:
    """Entry point: 0 when every variable set can be right, 2 (one line) when one cannot."""
    args = sys.argv[1:] if argv is None else argv
    command = args[0] if args else "run"
    valid = (*variables.COMMANDS, NONE)
    try:
        if command not in valid:
            raise UsageError(f"unknown command {command!r}; valid: {', '.join(valid)}")
        cmdline = os.environ.get(CMDLINE_ENV, "").split()
        check(command, os.environ, cmdline, os.environ.get(GOALS_ENV, "").split())
    except (UsageError, DeclarationError, StudyError) as exc:
        print(f"bench: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
