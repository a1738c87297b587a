"""Per-server virtual environments: servers/<id>/requirements.txt -> .bench/venvs/<id>.

Input: a ServerSpec. Output: the venv's python, created with uv only when absent or when the
pinned requirements changed (a stamp holds their hash), and the installed package versions.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

from bench.core.registry import ServerSpec
from bench.host.state import STATE

VENVS = STATE / "venvs"


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


def ensure_venv(spec: ServerSpec, log: Path | None = None) -> Path:
    """The python of the server's venv, (re)created from its pinned requirements if stale."""
    if spec.requirements is None:
        raise VenvError(f"{spec.id}: no requirements.txt")
    return make_venv(spec.id, spec.requirements, tuple(spec.install_flags), log)


def make_venv(
    name: str, requirements: Path, flags: tuple[str, ...] = (), log: Path | None = None
) -> Path:
    """The python of .bench/venvs/<name>, (re)created with uv when the requirements changed."""
    venv = VENVS / name
    stamp_file = venv / ".requirements.sha256"
    want = requirements_stamp(requirements, flags)
    python = venv / "bin" / "python"
    if stamp_file.exists() and stamp_file.read_text().strip() == want and python.exists():
        return python
    uv = uv_path()
    env = {**os.environ, "UV_PYTHON_DOWNLOADS": "never", "UV_NO_CONFIG": "1"}
    shutil.rmtree(venv, ignore_errors=True)
    steps = [
        [uv, "venv", "-q", "--python", "python3", str(venv)],
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
