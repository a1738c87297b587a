"""Bad input refused before anything is installed: `python3 -m bench.precheck <command>`.

Input: the make variables a command takes (bench/core/variables.py), read from the
environment make exports them in, and the declarations on disk (servers/, scenarios, studies/).
Output: exit status 0, or one line naming the valid choices and exit status 2. Runs with the
system's python3 and the standard library only, so `make capacity SLO_P99_MS=abc` is refused in
well under a second on a fresh clone instead of after apt, uv and a cargo build of oha. The
harness checks everything again, with the rules that need it running (bench/cli.py); LOAD
is checked there only, as the load tools are found by importing them (bench/load).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

from bench.core import plan, scenario
from bench.core.app import KINDS as APP_KINDS
from bench.core.registry import ROOT, DeclarationError, server_ids
from bench.core.validate import (
    LIMITS,
    UsageError,
    validate_choice,
    validate_choices,
    validate_cpus,
    validate_int,
    validate_int_list,
    validate_memory,
    validate_switch,
    validate_target,
    validate_trials,
)
from bench.core.variables import for_command
from bench.host.arch import ArchError, normalize_arch

LISTS = ("CONCURRENCY", "RATE")  # the numeric variables that take a comma list
SWITCH_VARIABLES = ("KEEPALIVE", "UPSTREAM_KEEPALIVE", "PIN", "REFERENCE", "LEGACY")
LIFECYCLES = ("reload",)


def _study_names() -> list[str]:
    return sorted(p.stem for p in (ROOT / "studies").glob("*.toml"))


def _cpu_quota(raw: str) -> None:
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0.01 <= value <= 1024:
        raise UsageError(f"CPU_QUOTA={raw!r} is not a number of CPUs (0.01..1024)")


def _arch(raw: str) -> None:
    try:
        normalize_arch(raw)
    except ArchError as exc:
        raise UsageError(str(exc)) from None


def _scenario(raw: str) -> None:
    if not os.environ.get("APP"):  # APP=: SCENARIO names the app's routes, read later
        validate_choices("scenario", raw, list(scenario.SCENARIOS), allow_all=True)


# Variables whose value is a choice among declared names or has a shape of its own.
CHOICES: dict[str, Callable[[str], object]] = {
    "SERVER": lambda raw: validate_choices("server", raw, server_ids(), allow_all=True),
    "SCENARIO": _scenario,
    "ARCH": _arch,
    "PROXY": lambda raw: validate_choice("proxy", raw, plan.PROXIES),
    "LIFECYCLE": lambda raw: validate_choice("lifecycle", raw, LIFECYCLES),
    "CPU_QUOTA": _cpu_quota,
    "RUNTIME": lambda raw: validate_choice("runtime", raw, plan.RUNTIMES),
    "NETWORK": lambda raw: validate_choice("network", raw, plan.NETWORKS),
    "CPUS": validate_cpus,
    "MEMORY": validate_memory,
    "TARGET": validate_target,
    "NAME": lambda raw: validate_choices("name", raw, _study_names(), allow_all=True),
    "TRIALS": lambda raw: validate_trials(raw, None),
    "APP_KIND": lambda raw: [validate_choice("app_kind", k, APP_KINDS) for k in raw.split(",")],
}


def check_value(name: str, raw: str) -> None:
    """One variable's value, by its declaration; UsageError when it cannot be right."""
    key = name.lower()
    if name in CHOICES:
        CHOICES[name](raw)
    elif name in SWITCH_VARIABLES:
        validate_switch(key, raw)
    elif key in LIMITS:
        (validate_int_list if name in LISTS else validate_int)(key, raw)


def _has_records(path: Path) -> bool:
    """A result set: records in `path/records/` (the harness writes them there; copied sets
    below it are merged by compare), found without walking the directory."""
    return (path / "records").is_dir() and any((path / "records").glob("*.json"))


def check_directories(command: str, env: dict[str, str]) -> None:
    """make report's RESULTS must exist; make compare's BASE and HEAD must be two result sets."""
    if command == "report" and env.get("RESULTS") and not Path(env["RESULTS"]).is_dir():
        raise UsageError(f"RESULTS={env['RESULTS']!r} does not exist; nothing to report")
    if command != "compare":
        return
    for side in ("BASE", "HEAD"):
        if not env.get(side):
            raise UsageError(f"{side} is required: make compare BASE=<dir> HEAD=<dir>")
        if not Path(env[side]).is_dir() or not _has_records(Path(env[side])):
            raise UsageError(f"{side}={env[side]!r} holds no records (<dir>/records/*.json)")
    if Path(env["BASE"]).resolve() == Path(env["HEAD"]).resolve():
        raise UsageError("BASE and HEAD are the same directory: compare two result sets")


def check(command: str, env: dict[str, str]) -> None:
    """Every variable `command` takes that is set in `env`; UsageError on the first bad one."""
    for variable in for_command(command):
        raw = env.get(variable.name)
        if raw:
            check_value(variable.name, raw)
    if env.get("BUDGET") and command == "run":  # BUDGET means something with TRIALS=auto only
        validate_trials(env.get("TRIALS") or "", env["BUDGET"])
    check_directories(command, env)


def main(argv: list[str] | None = None) -> int:
    """Entry point: 0 when every variable set can be right, 2 (one line) when one cannot."""
    args = sys.argv[1:] if argv is None else argv
    try:
        check(args[0] if args else "run", dict(os.environ))
    except (UsageError, DeclarationError) as exc:
        print(f"bench: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
