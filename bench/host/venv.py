"""Per-server virtual environments: servers/<id>/requirements.txt -> .bench/venvs/<id>.

Input: a ServerSpec (and PYTHON=, bench/core/pythons.py). Output: the venv's python, created
with uv only when absent or when the pinned requirements or the interpreter changed (a stamp
holds their hash), and the installed package versions. On PYTHON=<name> the venv is made from
the interpreter bench/python-build.sh built (.bench/tools/python/<name>), from the server's
[pythons."<name>"] requirements, under a name of its own: .bench/venvs/<id>@<name>.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

from bench.core.registry import ROOT, ServerSpec
from bench.host.state import STATE

VENVS = STATE / "venvs"
PYTHONS = STATE / "tools" / "python"  # bench/python-build.sh's prefixes, one per PYTHON= name
BUILD_SCRIPT = ROOT / "bench" / "python-build.sh"


class VenvError(RuntimeError):
    """A venv could not be created (the uv output says why)."""


def uv_path() -> str:
    """The uv binary bench/setup.sh installed or found."""
    recorded = STATE / "uv-path"
    if recorded.exists():
        path = recorded.read_text().strip()
        if os.access(path, os.X_OK):
            return path
    found = shutil.which("uv")
    if found is None:
        raise VenvError("uv not found: run `make setup` first")
    return found


def requirements_stamp(requirements: Path, flags: tuple[str, ...]) -> str:
    """What an environment was built from: the pinned file and the install flags, hashed."""
    digest = hashlib.sha256(requirements.read_bytes())
    digest.update(" ".join(flags).encode())
    return digest.hexdigest()


def venv_name(server: str, python: str | None) -> str:
    """The venv's folder name: the server id, with `@<name>` on PYTHON=<name> (never the
    name of the usual venv, whose interpreter differs)."""
    return server if python is None else f"{server}@{python}"


def interpreter(python: str, log: Path | None = None) -> Path:
    """The python3 bench/python-build.sh built for PYTHON=python, built now when absent (a
    study's arms name theirs: make setup builds only PYTHON='s); VenvError when it fails."""
    path = PYTHONS / python / "bin" / "python3"
    if os.access(path, os.X_OK):
        return path
    build = subprocess.run(["bash", str(BUILD_SCRIPT), python], capture_output=True, text=True)
    if log is not None:
        with open(log, "a") as fh:
            fh.write(f"$ bash {BUILD_SCRIPT} {python}\n{build.stdout}{build.stderr}")
    if build.returncode != 0 or not os.access(path, os.X_OK):
        last = (build.stderr or build.stdout).strip().splitlines()[-1:] or ["no output"]
        raise VenvError(
            f"PYTHON={python}: building it failed ({last[0]}); run bash bench/python-build.sh "
            f"{python} (make setup PYTHON={python} does)"
        )
    return path


def ensure_venv(spec: ServerSpec, log: Path | None = None, python: str | None = None) -> Path:
    """The python of the server's venv on PYTHON=python (None: the usual python3),
    (re)created from its pinned requirements if stale."""
    requirements = spec.requirements_on(python) if spec.runs_on(python) else None
    if requirements is None:
        raise VenvError(f"{spec.id}: no requirements for PYTHON={python or 'unset'}")
    base = interpreter(python, log) if python is not None else None
    return make_venv(venv_name(spec.id, python), requirements, tuple(spec.install_flags), log, base)


def interpreter_stamp(base: Path | None) -> tuple[str, ...]:
    """What a venv's interpreter adds to its stamp: its path and its build's stamp
    (bench/python-build.sh's .build: version, sha256, flags), so a rebuild makes new venvs."""
    if base is None:
        return ()
    build = base.parent.parent / ".build"
    return (f"python={base}", build.read_text().strip() if build.is_file() else "")


def make_venv(
    name: str,
    requirements: Path,
    flags: tuple[str, ...] = (),
    log: Path | None = None,
    base: Path | None = None,
) -> Path:
    """The python of .bench/venvs/<name> made from `base` (None: the system's python3),
    (re)created with uv when the requirements or the interpreter changed."""
    venv = VENVS / name
    stamp_file = venv / ".requirements.sha256"
    want = requirements_stamp(requirements, (*flags, *interpreter_stamp(base)))
    python = venv / "bin" / "python"
    if stamp_file.exists() and stamp_file.read_text().strip() == want and python.exists():
        return python
    uv = uv_path()
    env = {**os.environ, "UV_PYTHON_DOWNLOADS": "never", "UV_NO_CONFIG": "1"}
    shutil.rmtree(venv, ignore_errors=True)
    steps = [
        [uv, "venv", "-q", "--python", str(base or "python3"), str(venv)],
        [uv, "pip", "install", "-q", "--python", str(python), *flags, "-r", str(requirements)],
    ]
    for argv in steps:
        result = subprocess.run(
            argv, capture_output=True, text=True, env=env, cwd=requirements.parent
        )
        if log is not None:
            with open(log, "a") as fh:
                fh.write(f"$ {' '.join(argv)}\n{result.stdout}{result.stderr}")
        if result.returncode != 0:
            shutil.rmtree(venv, ignore_errors=True)
            last = (result.stderr or result.stdout).strip().splitlines()[-3:]
            raise VenvError(f"{name}: installing requirements failed: {' / '.join(last)}")
    stamp_file.write_text(want + "\n")
    return python


def tool_version(argv: tuple[str, ...]) -> str | None:
    """The version a tool prints (`nginx -v` -> `1.22.1`)."""
    try:
        result = subprocess.run(list(argv), capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = re.search(r"\d+\.\d+(\.\d+)?", result.stdout + result.stderr)
    return found.group(0) if found else None


def installed_packages(python: Path) -> dict[str, str]:
    """name -> version of every distribution installed in the venv of `python`."""
    code = (
        "import importlib.metadata as m, json;"
        "print(json.dumps({d.metadata['Name'].lower(): d.version for d in m.distributions()}))"
    )
    result = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        return {}
    return dict(sorted(json.loads(result.stdout).items()))
