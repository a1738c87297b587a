"""Run metadata: the machine, the software and the code that produced a record.

Input: the host (/proc, uname, git) and the server's venv. Output: a dict of snake_case keys
that goes into every record's `metadata`.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import platform
import socket
import subprocess
import uuid
from datetime import UTC, datetime
from pathlib import Path

from bench.core import variables
from bench.core.registry import ROOT


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


def cpu_mhz() -> int | None:
    """The CPU's clock in MHz as the kernel reports it: cpufreq's maximum where the kernel has
    cpufreq, else /proc/cpuinfo's first `cpu MHz` (x86; most VMs report the nominal clock);
    None where neither says (an arm64 VM without cpufreq)."""
    try:
        khz = Path("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq").read_text()
        return round(int(khz) / 1000)
    except (OSError, ValueError):
        pass
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("cpu mhz"):
                return round(float(line.split(":", 1)[1]))
    except (OSError, ValueError):
        pass
    return None


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


# The user's label for this machine (`make … MACHINE=graviton-c7g`): the Makefile exports it.
MACHINE_ENV = "PYWEBBENCH_MACHINE"
MACHINE_LABEL = variables.MACHINE_LABEL  # declared with MACHINE=
_APP_KEY = b"pywebbench machine identity v1"


def machine_label() -> str | None:
    """MACHINE=, or None; a bad label raises ValueError (the CLI turns it into exit 2)."""
    label = os.environ.get(MACHINE_ENV, "").strip()
    if not label:
        return None
    if not MACHINE_LABEL.fullmatch(label):
        raise ValueError(
            f"MACHINE={label!r}: a label of 1-40 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    return label


def machine_id() -> str:
    """A stable identity of this machine that two hosts with the same name never share:
    /etc/machine-id (systemd; D-Bus's copy otherwise) hashed with this application's key,
    as systemd asks of applications (the raw id is not to be published); a host without one
    falls back to its hardware address (uuid.getnode)."""
    for path in ("/etc/machine-id", "/var/lib/dbus/machine-id"):
        try:
            raw = Path(path).read_text().strip()
        except OSError:
            continue
        if raw:
            return hmac.new(raw.encode(), _APP_KEY, hashlib.sha256).hexdigest()[:12]
    node = str(uuid.getnode()).encode()
    return hmac.new(node, _APP_KEY, hashlib.sha256).hexdigest()[:12]


# One harness invocation is one process: its session id is drawn once, when this module is
# first imported, so every record it writes (every study arm too) carries the same one.
SESSION_ID = uuid.uuid4().hex[:16]


def new_start_id() -> str:
    """A fresh server-start id: one per server start (a block), in each of its records."""
    return uuid.uuid4().hex[:16]


def boot_id() -> str | None:
    """The kernel's id of this boot (/proc/sys/kernel/random/boot_id), None where absent."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip() or None
    except OSError:
        return None


def host_metadata() -> dict[str, object]:
    """What is fixed for the whole harness run: machine, OS, kernel, code, session."""
    return {
        "session_id": SESSION_ID,
        "boot_id": boot_id(),
        "hostname": socket.gethostname(),
        "machine_id": machine_id(),
        "machine_label": machine_label(),
        "cpu_model": cpu_model(),
        "cpu_mhz": cpu_mhz(),
        "cpu_count": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)),
        "kernel": platform.release(),
        "os": os_name(),
        "harness_python": platform.python_version(),
        "git_commit": git_commit(),
    }
