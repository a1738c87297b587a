"""Study files' static schema: studies/<name>.toml read and checked without the harness.

Input: a study file's path. Output: its TOML as a dict, its top-level keys present where
required and of their type, its arms' ids, servers and settings keys known and typed; or
StudyError naming the file and the key. Standard library only: the pre-check
(bench/precheck.py) runs it before anything is installed; bench.studies.schema runs it first
and then the rules that need the load tools.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from bench.core import defaults, plan
from bench.core.registry import ROOT, server_ids

STUDIES_DIR = ROOT / "studies"  # read at call time: tests point it elsewhere

# What [run] or an arm may set besides id, label, server, knobs -> the TOML type it must have.
SETTING_TYPES: dict[str, type] = {
    "group": str,
    "proxy": str,
    "keepalive": bool,
    "upstream_keepalive": bool,
    "proxy_timeout": int,
    "app_env": dict,
    "path": str,
    "paths": dict,
    "scenario": str,
    "scenarios": list,
    "concurrency": list,
    "duration": int,
    "warmup": int,
    "trials": int,
    "load_timeout": int,
    "cpu_quota": float,  # CPUs (1.0, 0.5): the server in a cgroup with this quota (CPU_QUOTA=)
    # runtime = "docker": the server in its image (RUNTIME=), with the engine's limits cpus
    # (CPUS=, docker's --cpus) and memory (MEMORY=, docker's --memory syntax: "512m")
    "runtime": str,
    "cpus": float,
    "memory": str,
    "lifecycle": str,  # "reload": the server's reload mid-window (LIFECYCLE=)
    "recycle": int,  # requests per worker before the server's own recycling (RECYCLE=)
    "protocol": str,  # how the load talks to the server (PROTOCOL=, bench/core/protocol.py)
    "streams": int,  # HTTP/2 requests in flight per connection (STREAMS=)
    # the interpreter of the arm's server venv (PYTHON=, bench/core/pythons.py: "3.13t")
    "python": str,
    # The arm in a network namespace of its own (root only, bench.host.netns) with these
    # sysctls set there: its own kernel settings, counters and port range.
    "namespace": bool,
    "sysctls": dict,
    # The keep-alive race (load = "race", bench.load.race): bursts of race_burst concurrent
    # requests after each idle gap of race_gaps_ms, race_rounds times; or, with probe_limit
    # (seconds allowed), the server's idle close measured first and the gaps set at
    # race_offsets_ms from it: the timeout is measured, not taken from the declaration.
    # race_budget: seconds of idle gaps an arm may spend (bench.load.race.within_budget).
    "race_gaps_ms": list,
    "race_offsets_ms": list,
    "race_burst": int,
    "race_rounds": int,
    "probe_limit": int,
    "race_budget": int,
}
ARM_SETTINGS = set(SETTING_TYPES)
# Keys only an arm may set: a load tool of its own, its offered rates, and what it takes from
# the first phase's records. [run] is the closed-loop setting the other arms share.
OPEN_LOOP_KEYS = ("load", "rates", "rates_from", "from_best")
# An arm's own keys beside its settings: `tune`, the space make tune's search races for it.
ARM_OWN_KEYS = ("id", "label", "server", "knobs", "tune", *OPEN_LOOP_KEYS)
# Top-level keys -> (their TOML type, required).
TOP_TYPES: dict[str, tuple[type, bool]] = {
    "title": (str, True),
    "source": (str, True),
    "claim": (str, True),
    "differs": (str, True),
    "run": (dict, True),
    "arm": (list, True),
    "check": (list, False),  # required unless `expect` says what is expected instead
    "expect": (str, False),
    "published": (list, False),
    "metrics": (list, False),
    "plot_metric": (str, False),
    "best_by": (str, False),
    "open_metrics": (list, False),
    "not_run": (list, False),
    # server id -> why it has no fix arm (the race: no setting keeps an idle connection open
    # past the balancer's): said in the section instead of an invented arm.
    "no_fix": (dict, False),
    # the searches of the arms with `tune` (objective, budget, margin, why): issue 31
    "tune": (dict, False),
}
_TYPE_NAMES = {str: "a string", dict: "a table", list: "a list", int: "a whole number"}
_TYPE_NAMES[bool] = "true or false"
_TYPE_NAMES[float] = "a number of CPUs with a decimal point (1.0)"


class StudyError(ValueError):
    """A study file that does not say what the harness needs."""


def type_name(kind: type) -> str:
    """A TOML type as the refusal names it."""
    return _TYPE_NAMES.get(kind, kind.__name__)


def read_study(path: Path) -> dict:
    """The study file parsed, its top-level keys present where required and of their type."""
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise StudyError(f"{path}: {exc}") from exc
    for key, (kind, required) in TOP_TYPES.items():
        if key not in data:
            if required:
                raise StudyError(f"{path}: missing `{key}`")
        elif not isinstance(data[key], kind):
            raise StudyError(f"{path}: `{key}` must be {type_name(kind)}")
    if "check" not in data and "expect" not in data:
        raise StudyError(f"{path}: missing `check` (or `expect`: what is expected, in prose)")
    if "check" in data and "expect" in data:
        raise StudyError(f"{path}: give [[check]] tables (a verdict) or `expect`, not both")
    return data


def check_settings(path: Path, where: str, settings: dict) -> None:
    """[run] or an arm's overrides: known keys with the right types."""
    misplaced = set(settings) & set(OPEN_LOOP_KEYS)
    if misplaced:
        raise StudyError(f"{path}: {where}: {sorted(misplaced)} belong to an [[arm]]")
    unknown = set(settings) - ARM_SETTINGS
    if unknown:
        raise StudyError(f"{path}: {where} has unknown keys {sorted(unknown)}")
    for key, value in settings.items():
        kind = SETTING_TYPES[key]
        # bool is an int in Python; a TOML true is not a number of seconds
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise StudyError(f"{path}: {where}: {key} must be {type_name(kind)}")
    if settings.get("proxy", defaults.PROXY) not in plan.PROXIES:
        raise StudyError(f"{path}: {where}: proxy must be one of {', '.join(plan.PROXIES)}")
    if not all(isinstance(c, int) and c > 0 for c in settings.get("concurrency", [1])):
        raise StudyError(f"{path}: {where}: concurrency must be a list of positive numbers")


def check_study(path: Path) -> dict:
    """A study file's static schema: its top-level keys, [run]'s settings, each arm's id,
    server (a declared one) and settings; the TOML as a dict, or StudyError."""
    data = read_study(path)
    check_settings(path, "[run]", data["run"])
    servers = server_ids()
    for raw in data["arm"]:
        if not (isinstance(raw, dict) and isinstance(raw.get("id"), str)):
            raise StudyError(f"{path}: every [[arm]] needs an id = '...'")
        if raw.get("server") not in servers:
            raise StudyError(
                f"{path}: arm {raw['id']} needs a server = '<server id>'; valid: "
                f"{', '.join(servers)}"
            )
        if not isinstance(raw.get("knobs", {}), dict):
            raise StudyError(f"{path}: arm {raw['id']}: knobs must be a table")
        own = {k: v for k, v in raw.items() if k not in ARM_OWN_KEYS}
        check_settings(path, f"arm {raw['id']}", own)
    return data


def study_names() -> list[str]:
    """Every study file's name (NAME= takes these, or all)."""
    return sorted(p.stem for p in STUDIES_DIR.glob("*.toml"))


def study_path(name: str) -> Path:
    """The file of a study NAME= names."""
    return STUDIES_DIR / f"{name}.toml"


# Metrics counted on failed runs too (a server the kernel's OOM kills brought down is the
# finding): bench.studies.metrics reads them off failed records.
ON_FAILED_RUNS = ("oom_kills",)


def failures_are_findings(checks: list[dict] | tuple[dict, ...], failed_arms: list[str]) -> bool:
    """Whether failed runs of these arms (one at least) are what the study measures, not runs
    gone wrong: each arm is a side of a check on a metric counted on failed runs too
    (container-limits' default worker rule under a memory limit, brought down by the kernel's
    OOM kills). make study exits 0 for them; make reference reads a ledger line written
    before it did so as answered."""
    sides = {
        str(check[side]["arm"])
        for check in checks
        if check.get("metric") in ON_FAILED_RUNS
        for side in ("a", "b")
        if isinstance(check.get(side), dict) and "arm" in check[side]
    }
    return bool(failed_arms) and all(arm in sides for arm in failed_arms)
