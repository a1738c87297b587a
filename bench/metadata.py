"""Run metadata: the machine, the software and the code that produced a record.

Input: the host (/proc, uname, git) and the server's venv. Output: a dict of snake_case keys
that goes into every record's `metadata`.
"""

from __future__ import annotations

import os
import platform
import socket
import subprocess
from datetime import UTC, datetime
from pathlib import Path

from bench.registry import ROOT


def now_iso() -> str:
    """UTC time as an ISO 8601 string with seconds."""
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (or the machine type when it has none)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith(("model name", "cpu model", "hardware")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.machine()


def os_name() -> str:
    """PRETTY_NAME from /etc/os-release."""
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                return line.split("=", 1)[1].strip('"')
    except OSError:
        pass
    return platform.system()


def git_commit() -> str | None:
    """HEAD of the checkout, with `-dirty` when tracked files differ from it."""
    try:
        head = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True
        )
        if head.returncode != 0:
            return None
        dirty = subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
        )
        return head.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except OSError:
        return None


def python_version(python: Path | str) -> str | None:
    """The version of an interpreter, asked from the interpreter itself."""
    result = subprocess.run(
        [str(python), "-c", "import platform; print(platform.python_version())"],
        capture_output=True,
        text=True,
    )
    return result.stdout.strip() or None


def host_metadata() -> dict[str, object]:
    """What is fixed for the whole harness run: machine, OS, kernel, code."""
    return {
        "hostname": socket.gethostname(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)),
        "kernel": platform.release(),
        "os": os_name(),
        "harness_python": platform.python_version(),
        "git_commit": git_commit(),
    }
