"""Validators of make variables: raw text -> a checked value, or UsageError in one line.

Input: a variable's name and the text the user gave. Output: the value, or UsageError whose
message names the valid choices (exit status 2 where it is caught). Standard library only:
`bench.precheck` runs these with the system's python3 before anything is installed.
"""

from __future__ import annotations

import math
import os
import re
import tempfile
import urllib.parse
from collections.abc import Iterable
from pathlib import Path

SWITCHES = {"on": True, "off": False, "1": True, "0": False}


class UsageError(ValueError):
    """Bad input: reported in one line with exit status 2."""


def limits(name: str) -> tuple[int, int]:
    """A whole-number variable's declared bounds (bench/core/variables.py)."""
    from bench.core.variables import BY_NAME  # declared with these validators as parsers

    bounds = BY_NAME[name.upper()].limits
    assert bounds is not None, name
    return bounds


def validate_int(name: str, raw: str) -> int:
    """An integer within the variable's declared bounds."""
    low, high = limits(name)
    try:
        value = int(raw.strip())
    except ValueError:
        raise UsageError(f"{name.upper()}={raw!r} is not a whole number ({low}..{high})") from None
    if not low <= value <= high:
        raise UsageError(f"{name.upper()}={value} is out of range {low}..{high}")
    return value


def validate_trials(raw: str, budget: str | None) -> tuple[int | None, int | None]:
    """TRIALS (a whole number or `auto`) and BUDGET (minutes, TRIALS=auto only): (trials,
    budget): trials None for auto, budget None when not set."""
    auto = raw.strip().lower() == "auto"
    if not auto:
        low, high = limits("trials")
        try:
            int(raw.strip())
        except ValueError:
            raise UsageError(
                f"TRIALS={raw!r} is not a whole number ({low}..{high}) or auto"
            ) from None
    minutes = validate_int("budget", budget) if budget is not None and budget.strip() else None
    if minutes is not None and not auto:
        raise UsageError(
            f"BUDGET={budget} applies to TRIALS=auto only; valid: TRIALS=auto BUDGET=<minutes>"
        )
    return (None if auto else validate_int("trials", raw)), minutes


def validate_int_list(name: str, raw: str) -> tuple[int, ...]:
    """A comma list of integers within the declared bounds, duplicates removed, order kept."""
    items = [item for item in raw.split(",") if item.strip()]
    if not items:
        raise UsageError(f"{name.upper()} is empty; give a comma list of numbers")
    return tuple(dict.fromkeys(validate_int(name, item) for item in items))


def case_hint(given: str, valid: Iterable[str]) -> str:
    """ "did you mean h2c? " when `given` differs from a valid value in case only (every choice
    is exact and case-sensitive, one rule for all: PROTOCOL=H2C as SCENARIO=DB)."""
    same = [v for v in valid if v.lower() == given.strip().lower()]
    return f"did you mean {same[0]}? " if same else ""


def validate_choices(name: str, raw: str, valid: list[str], allow_all: bool) -> tuple[str, ...]:
    """A comma list of names from `valid` (or `all`), exact."""
    items = [item.strip() for item in raw.split(",") if item.strip()]
    if allow_all and items == ["all"]:
        return tuple(valid)
    unknown = [item for item in items if item not in valid]
    if unknown or not items:
        choices = ", ".join(valid) + (", all" if allow_all else "")
        hint = case_hint(unknown[0], [*valid, "all"]) if unknown else ""
        raise UsageError(
            f"unknown {name.upper()} {','.join(unknown) or raw!r}; {hint}valid: {choices}"
        )
    return tuple(dict.fromkeys(items))


def validate_switch(name: str, raw: str) -> bool:
    """on/off (or 1/0), exact as every choice (case_hint names the one meant)."""
    try:
        return SWITCHES[raw.strip()]
    except KeyError:
        hint = case_hint(raw, SWITCHES)
        raise UsageError(f"{name.upper()}={raw!r} is not a switch; {hint}valid: on, off") from None


def validate_choice(name: str, raw: str, valid: tuple[str, ...]) -> str:
    """Exactly one of `valid`, case included (case_hint names the one meant)."""
    value = raw.strip()
    if value not in valid:
        hint = case_hint(value, valid)
        raise UsageError(f"unknown {name.upper()} {raw!r}; {hint}valid: {', '.join(valid)}")
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


# RUNTIME=docker's limits, in the engine's own syntax (docker run --help; Docker's "Runtime
# options with Memory, CPUs"): --cpus 0.01..the CPUs it has, --memory a number with b, k, m or
# g (binary units), at least 6 MiB ("Minimum memory limit allowed is 6MB").
CPUS_MIN = 0.01
MEMORY_MIN = 6 * 2**20
MEMORY_UNITS = {"": 1, "b": 1, "k": 2**10, "m": 2**20, "g": 2**30}
MEMORY_RE = re.compile(r"^(\d+(?:\.\d+)?)([bkmg]?)$")


def parse_memory(raw: str) -> int:
    """MEMORY= as docker reads `--memory` -> bytes; ValueError when it is not a size or is
    below docker's floor."""
    match = MEMORY_RE.match(raw.strip().lower())
    if match is None:
        raise ValueError(f"{raw!r} is not a size")
    size = int(float(match.group(1)) * MEMORY_UNITS[match.group(2)])
    if size < MEMORY_MIN:
        raise ValueError(f"{raw!r} is below docker's floor of 6m")
    return size


def parse_cpus(raw: str, available: int) -> float:
    """CPUS= as docker reads `--cpus`: CPUS_MIN..available; ValueError otherwise."""
    value = float(raw.strip())
    if not (math.isfinite(value) and CPUS_MIN <= value <= available):
        raise ValueError(f"{raw!r} is outside {CPUS_MIN:g}..{available}")
    return value


def validate_cpus(raw: str) -> float:
    """CPUS=: the CPUs a container may use, within what this machine has."""
    available = os.cpu_count() or 1
    try:
        return parse_cpus(raw, available)
    except ValueError:
        raise UsageError(
            f"CPUS={raw!r} is not a number of CPUs in {CPUS_MIN:g}..{available} (e.g. 0.5, 1)"
        ) from None


def validate_memory(raw: str) -> int:
    """MEMORY=: a container's memory limit in bytes."""
    try:
        return parse_memory(raw)
    except ValueError:
        raise UsageError(
            f"MEMORY={raw!r} is not a size of at least 6m: a number with k, m or g (e.g. 512m, 1g)"
        ) from None
