"""Each server's environment: a venv here, or an emulated site under qemu (ARCH=arm64 on an
amd64 host), or nothing to prepare (a server that is not Python).

Input: the specs of the servers a run needs, the arch and PYTHON=. Output: per server (keyed
by its venv's name, bench.host.venv.venv_name: the server id unless PYTHON= is set) one
Environment (python, packages, extra env, Python version) or Unavailable (failed or
unsupported, with the reason and the names of the logs that say why), and the Emulator when
one is used.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bench.core.app import AppSpec
from bench.core.registry import ServerSpec
from bench.host.arch import (
    EmulationError,
    Emulator,
    ensure_emulator,
    ensure_site,
    needs_emulation,
    site_packages,
)
from bench.host.metadata import python_version
from bench.host.venv import (
    VenvError,
    ensure_venv,
    installed_packages,
    tool_version,
    uv_path,
    venv_name,
)


@dataclass(frozen=True)
class Environment:
    """How to run one server here."""

    python: Path
    packages: dict[str, str]
    python_version: str | None
    env: dict[str, str] = field(default_factory=dict)
    remote: bool = False  # TARGET=: the server runs elsewhere, only its name is known here

    def meta(self, spec: ServerSpec) -> dict[str, object]:
        """The record's metadata about the server's software."""
        package = spec.package or spec.id
        if self.remote:
            return {"server_package": package}
        return {
            "packages": self.packages,
            "server_package": package,
            "server_version": self.packages.get(package),
            "python_version": self.python_version,
        }


@dataclass(frozen=True)
class Unavailable:
    """Why a server cannot run here: a failure, or a fact about the server (unsupported)."""

    reason: str
    status: str = "failed"
    logs: tuple[str, ...] = ()  # names of log files in the run directory


Prepared = Environment | Unavailable
LOGS = ("venv.log", "emulation.log")


def _with_app(spec: ServerSpec, app: AppSpec, run_dir: Path) -> Prepared:
    """APP=: the server's venv with the app's requirements on top, when it can serve one of
    the app's entries (a WSGI server a WSGI callable, an ASGI server an ASGI one)."""
    from bench.host.appenv import AppEnvError, ensure_app_venv

    if app.entry_for(spec.app) is None:
        given = ", ".join(f"{e.kind or '?'} ({e.given})" for e in app.entries)
        reason = f"{spec.id} serves {spec.app}; APP gives {given}"
        return Unavailable(reason, "unsupported")
    try:
        python = ensure_app_venv(spec, app, run_dir / "venv.log")
    except AppEnvError as exc:
        return Unavailable(str(exc), logs=LOGS)
    return Environment(python, installed_packages(python), python_version(python))


def _native(
    spec: ServerSpec, run_dir: Path, app: AppSpec | None = None, python: str | None = None
) -> Prepared:
    if app is not None:
        return _with_app(spec, app, run_dir)
    if spec.requirements is None:
        # Not a Python server (nginx-static): no venv; its version comes from the tool.
        version = tool_version(spec.version_argv) if spec.version_argv else None
        return Environment(Path(sys.executable), {spec.id: version} if version else {}, None)
    try:
        venv = ensure_venv(spec, run_dir / "venv.log", python)
        return Environment(venv, installed_packages(venv), python_version(venv))
    except VenvError as exc:
        return Unavailable(str(exc), logs=LOGS)


def _emulated(spec: ServerSpec, emulator: Emulator, run_dir: Path) -> Prepared:
    if spec.requirements is None:
        return Unavailable(f"{spec.id} is not a Python server: nothing to emulate", "unsupported")
    try:
        site = ensure_site(
            emulator,
            spec.id,
            spec.requirements,
            tuple(spec.install_flags),
            uv_path(),
            run_dir / "emulation.log",
        )
    except EmulationError as exc:
        return Unavailable(str(exc), logs=LOGS)
    return Environment(
        emulator.python, site_packages(site), emulator.python_version, emulator.env(site)
    )


def prepare_servers(
    specs: list[ServerSpec],
    arch: str,
    run_dir: Path,
    say: Callable[[str], None],
    app: AppSpec | None = None,
    python: str | None = None,
) -> tuple[dict[str, Prepared], Emulator | None]:
    """One Environment or Unavailable per server (with APP=: the app's requirements layered
    on the server's; with PYTHON=: its venv on that interpreter, keyed `<id>@<python>`), and
    the emulator if the arch needs one."""
    emulator = None
    if needs_emulation(arch):
        say(f"preparing the {arch} interpreter under qemu")
        try:
            emulator = ensure_emulator(run_dir / "emulation.log")
        except EmulationError as exc:
            failed = Unavailable(f"emulation: {exc}", logs=LOGS)
            return {venv_name(spec.id, python): failed for spec in specs}, None
    prepared: dict[str, Prepared] = {}
    for spec in specs:
        if emulator is not None:
            say(f"{spec.id}: preparing its {arch} wheels")
            prepared[venv_name(spec.id, python)] = _emulated(spec, emulator, run_dir)
        else:
            if spec.requirements is not None:
                on = f" on Python {python}" if python is not None else ""
                say(f"{spec.id}: preparing its venv{on}")
            prepared[venv_name(spec.id, python)] = _native(spec, run_dir, app, python)
    return prepared, emulator
