"""Bad input refused before anything is installed: `python3 -m bench.precheck <command>`.

Input: the make variables a command takes (bench/core/variables.py), read from the
environment make exports them in, and the declarations on disk (servers/, scenarios, studies/).
Output: exit status 0, or one line naming the valid choices and exit status 2. Runs with the
system's python3 and the standard library only, so `make capacity SLO_P99_MS=abc` is refused in
well under a second on a fresh clone instead of after apt, uv and a cargo build of oha. The
harness checks everything again, with the rules that need it running (bench/cli.py); LOAD's
names are read from the load tools' source (importing them needs psutil), its pairings with
other variables are checked by the harness only.
"""

from __future__ import annotations

import ast
import os
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path

from bench.core import defaults, plan, scenario
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
from bench.report import inputs

LISTS = ("CONCURRENCY", "RATE")  # the numeric variables that take a comma list
SWITCH_VARIABLES = ("KEEPALIVE", "UPSTREAM_KEEPALIVE", "PIN", "REFERENCE", "LEGACY")
LIFECYCLES = ("reload",)


def load_names() -> list[str]:
    """The names LOAD= takes, read without importing the tools: each bench/load module's
    `TOOL = <class>`, that class's `name` unless it sets `selectable` false (held to
    bench.load.names() by tests/bench/test_precheck.py)."""
    names = []
    for path in sorted((ROOT / "bench" / "load").glob("*.py")):
        tree = ast.parse(path.read_text())
        tool = next(
            (
                node.value.id
                for node in tree.body
                if isinstance(node, ast.Assign)
                and [getattr(t, "id", None) for t in node.targets] == ["TOOL"]
                and isinstance(node.value, ast.Name)
            ),
            None,
        )
        classes = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == tool]
        attrs = {
            node.target.id: node.value
            for cls in classes
            for node in cls.body
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
        }
        name, selectable = attrs.get("name"), attrs.get("selectable")
        if isinstance(name, ast.Constant) and not (
            isinstance(selectable, ast.Constant) and selectable.value is False
        ):
            names.append(str(name.value))
    return sorted(names)


def _study_names() -> list[str]:
    return sorted(p.stem for p in (ROOT / "studies").glob("*.toml"))


def _arms(raw: str, names: str) -> None:
    """ARMS: arm ids of the studies NAME names (their [[arm]] tables, read as TOML here; the
    harness refuses second-phase arms, which need the file's rules)."""
    if raw.strip() == "all" or not names:  # without NAME the harness says NAME is required
        return
    chosen = validate_choices("name", names, _study_names(), allow_all=True)
    ids: list[str] = []
    for name in chosen:
        try:
            data = tomllib.loads((ROOT / "studies" / f"{name}.toml").read_text())
        except (OSError, tomllib.TOMLDecodeError):
            return  # the harness names the file's problem
        ids += [str(arm.get("id")) for arm in data.get("arm", []) if isinstance(arm, dict)]
    validate_choices("arms", raw, list(dict.fromkeys(ids)), allow_all=False)


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
    "LOAD": lambda raw: validate_choice("load", raw, load_names()),
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
    if command == "report":  # a fresh clone: said before set-up installs anything
        inputs.require_record_files(env.get("RESULTS") or defaults.RESULTS, env)
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
    if env.get("ARMS") and command == "study":  # arm ids of the studies NAME names
        _arms(env["ARMS"], env.get("NAME") or "")
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
