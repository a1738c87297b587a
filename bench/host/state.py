"""The harness's state directory and the machine's measuring lock: defined here and nowhere else.

Input: the checkout's root. Output: STATE (`.bench/` in the checkout: venvs, tools, the
emulated arm64 tree), state_base() (where runtime state lives: the PostgreSQL cluster and the
run directories) and machine_lock(), one measuring harness per machine at a time (a file in
/run/lock, whatever the checkout).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import psutil

from bench.core.registry import ROOT
from bench.host.metadata import now_iso

STATE = ROOT / ".bench"
# Every session's host speed on this machine, one JSON line each (bench.host.speed): what the
# start line compares with. Machine-local state, never results: the records carry their own.
SPEED_HISTORY = STATE / "state" / "speed-history.jsonl"

# PostgreSQL's socket directory: short (Unix socket paths are limited to 107 bytes), so in the
# system's temp directory rather than state_base(), and named by the harness's pid, so that the
# one a killed harness left is found at the next start (socket_leftovers).
SOCKET_PREFIX = "pwb-pg-"
_SOCKET_RE = re.compile(rf"^{SOCKET_PREFIX}(\d+)-\w+$")


def socket_dir() -> Path:
    """A new private directory for PostgreSQL's socket, this harness's (0700)."""
    path = Path(tempfile.mkdtemp(prefix=f"{SOCKET_PREFIX}{os.getpid()}-"))
    path.chmod(0o700)
    return path


def socket_leftovers(
    base: Path | None = None, alive: Callable[[int], bool] = psutil.pid_exists
) -> list[Path]:
    """The socket directories under `base` (the system's temp directory) whose harness is
    gone: killed before its clean-up ran (a run of the test suite's kill during the seed left
    three behind, with the dead postmaster's socket and lock)."""
    found = []
    with contextlib.suppress(OSError):
        for path in sorted((base or Path(tempfile.gettempdir())).iterdir()):
            match = _SOCKET_RE.match(path.name)
            if match is None or not path.is_dir():
                continue
            pid = int(match.group(1))
            if pid != os.getpid() and not alive(pid):
                found.append(path)
    return found


class LockedError(RuntimeError):
    """Another harness run holds the lock."""


def service_user() -> str | None:
    """The OS user for PostgreSQL and pgbouncer: `postgres` when we are root, else ourselves."""
    return "postgres" if os.geteuid() == 0 else None


def _reachable_by_others(path: Path) -> bool:
    return all(os.stat(p).st_mode & 0o001 for p in [path, *path.parents] if p.exists())


def state_base() -> Path:
    """Where runtime state (cluster, run dirs) lives: .bench/, or /var/tmp when the checkout
    is under a directory the postgres user cannot enter (e.g. /root)."""
    STATE.mkdir(exist_ok=True)
    if service_user() is None or _reachable_by_others(STATE):
        return STATE
    digest = hashlib.sha256(str(ROOT).encode()).hexdigest()[:12]
    alt = Path("/var/tmp") / f"pywebbench-{digest}"
    alt.mkdir(mode=0o711, exist_ok=True)
    return alt


# One measuring harness per machine, whatever the checkout: the lock lives where every
# checkout (and every user) finds it, not in .bench/. /run/lock is the FHS place for it.
LOCK_NAME = "pywebbench-bench.lock"
LOCK_DIRS = ("/run/lock", "/var/lock")
# The unit tests' fakes measure nothing: tests/bench/conftest.py points this at a file of
# their own so that they never wait for a real run. Nothing else sets it.
LOCK_ENV = "PYWEBBENCH_LOCK"


def lock_path() -> Path:
    """The machine-wide lock file: /run/lock (or /var/lock, else the temp dir)."""
    override = os.environ.get(LOCK_ENV)
    if override:
        return Path(override)
    for folder in LOCK_DIRS:
        if os.path.isdir(folder) and os.access(folder, os.W_OK):
            return Path(folder) / LOCK_NAME
    return Path(tempfile.gettempdir()) / LOCK_NAME


def _open_lock(path: Path) -> IO[str]:
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        mode = "r+"
    except PermissionError:  # another user's file in a sticky directory: flock still works
        fd, mode = os.open(path, os.O_RDONLY), "r"
    with contextlib.suppress(OSError):
        os.fchmod(fd, 0o666)  # the next user's harness must be able to open it too
    return os.fdopen(fd, mode)


def _holder(fh: IO[str]) -> str:
    fh.seek(0)
    return fh.read().strip() or "another harness run"


@contextmanager
def machine_lock(wait: bool = True, say: Callable[[str], None] | None = None) -> Iterator[None]:
    """One measuring harness per machine at a time. Held elsewhere: wait, saying once what
    holds it (`say`), or with wait=False raise LockedError at once. flock dies with its
    holder: no stale locks."""
    path = lock_path()
    with _open_lock(path) as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fh)
            if not wait:
                raise LockedError(f"another harness run holds {path} ({holder})") from None
            if say is not None:
                say(f"waiting for {path}: held by {holder}")
            fcntl.flock(fh, fcntl.LOCK_EX)
        if fh.writable():
            fh.seek(0)
            fh.truncate()
            fh.write(f"pid {os.getpid()}, checkout {ROOT}, since {now_iso()}\n")
            fh.flush()
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
