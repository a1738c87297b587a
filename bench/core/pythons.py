"""The interpreters PYTHON= names (issue 33): a CPython built here, free-threaded or not.

Input: bench/python-builds.toml (minor version -> pinned source tarball and its sha256, or why
none is reachable from this machine). Output: the names PYTHON= takes ("3.13" with the GIL,
"3.13t" free-threaded: the same tarball built with --disable-gil), the one-line refusal of a
name that is unknown or cannot be built here, and what a name means (its minor version,
whether it is free-threaded). Unset, PYTHON= is the harness's usual interpreter (each server's
venv from the system python3, as before). Standard library only: the pre-check reads it.
"""

from __future__ import annotations

import functools
import tomllib
from dataclasses import dataclass
from pathlib import Path

from bench.core.validate import UsageError

# bench/core/registry.py reads server.toml's [pythons.<name>] with names(): ROOT is not
# imported from it.
BUILDS_FILE = Path(__file__).resolve().parents[2] / "bench" / "python-builds.toml"
FREE_THREADED = "t"  # the suffix of a free-threaded build's name, as CPython's own (3.13t)
# The record's interpreter.build (format 14): what sysconfig's Py_GIL_DISABLED says.
BUILD_FREE_THREADED = "free-threaded"
BUILD_DEFAULT = "default"


@dataclass(frozen=True)
class Build:
    """One minor version's pinned source, or why there is none here."""

    minor: str  # "3.13"
    version: str | None = None  # "3.13.5"
    url: str | None = None
    sha256: str | None = None
    unreachable: str | None = None  # why no tarball can be fetched from this machine


@functools.cache
def builds() -> dict[str, Build]:
    """Every minor version declared in bench/python-builds.toml."""
    data = tomllib.loads(BUILDS_FILE.read_text())
    return {minor: Build(minor, **table) for minor, table in data["builds"].items()}


def names() -> tuple[str, ...]:
    """Every name PYTHON= takes: each minor version with the GIL, then free-threaded."""
    return tuple(n for minor in builds() for n in (minor, minor + FREE_THREADED))


def minor_of(name: str) -> str:
    """The minor version of a name: 3.13t -> 3.13."""
    return name.removesuffix(FREE_THREADED)


def is_free_threaded(name: str | None) -> bool:
    """Whether PYTHON=name is a free-threaded (--disable-gil) build."""
    return name is not None and name.endswith(FREE_THREADED)


def parse_python(raw: str) -> str:
    """PYTHON=: a declared name whose tarball is reachable; UsageError in one line otherwise."""
    name = raw.strip()
    valid = names()
    if name not in valid:
        raise UsageError(
            f"PYTHON={raw!r} is not an interpreter this harness builds; valid: "
            f"{', '.join(valid)} (unset: the harness's usual python3)"
        )
    build = builds()[minor_of(name)]
    if build.unreachable is not None:
        usable = [n for n in valid if builds()[minor_of(n)].unreachable is None]
        raise UsageError(
            f"PYTHON={name} cannot be built here: {build.unreachable}; valid: "
            f"{', '.join(usable) or 'none'}"
        )
    return name
