"""The harness's state directory and its run lock: defined here and nowhere else.

Input: the checkout's root. Output: STATE (`.bench/` in the checkout: venvs, tools, the
emulated arm64 tree), state_base() (where runtime state lives: the PostgreSQL cluster and the
run directories) and run_lock(), one harness run per checkout at a time.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bench.core.registry import ROOT
from bench.host.metadata import now_iso

STATE = ROOT / ".bench"


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


@contextmanager
def run_lock(base: Path) -> Iterator[None]:
    """One harness run per checkout at a time. flock dies with its holder: no stale locks."""
    path = base / "bench.lock"
    with open(path, "a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            holder = fh.read().strip() or "another run"
            raise LockedError(f"another harness run is in progress ({holder})") from None
        fh.seek(0)
        fh.truncate()
        fh.write(f"pid {os.getpid()} since {now_iso()}\n")
        fh.flush()
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
