"""The machine-wide lock: one measuring harness per machine, whatever the checkout; the
second waits saying what holds it, or refuses at once (WAIT=0). Two real processes."""

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from bench.core.registry import ROOT
from bench.harness.run import guarded
from bench.host import state
from bench.host.state import LOCK_ENV, LockedError, lock_path, machine_lock


def test_the_lock_is_one_file_per_machine_not_per_checkout(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the unit tests' override the lock lives in /run/lock (or /var/lock), a path
    that names no checkout."""
    monkeypatch.delenv(LOCK_ENV, raising=False)
    path = lock_path()
    assert path.name == "pywebbench-bench.lock"
    assert str(ROOT) not in str(path)
    if os.path.isdir("/run/lock") and os.access("/run/lock", os.W_OK):
        assert path == Path("/run/lock/pywebbench-bench.lock")


def _holder(lock: Path) -> subprocess.Popen:
    """Another process holding the lock through machine_lock, until its stdin closes."""
    code = (
        "import sys; from bench.host.state import machine_lock; "
        "lock = machine_lock(wait=False); lock.__enter__(); print('held', flush=True); "
        "sys.stdin.read()"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env={**os.environ, LOCK_ENV: str(lock)},
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == b"held"
    return proc


@pytest.fixture
def held(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    lock = tmp_path / "machine.lock"
    monkeypatch.setenv(LOCK_ENV, str(lock))
    proc = _holder(lock)
    yield proc
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def test_wait_0_refuses_at_once_naming_the_holder(held: subprocess.Popen) -> None:
    """While another process holds it, wait=False raises at once with its pid and checkout."""
    with pytest.raises(LockedError) as caught, machine_lock(wait=False):
        pass
    assert f"pid {held.pid}, checkout {ROOT}, since " in str(caught.value)


def test_the_second_waits_with_one_line_then_runs(held: subprocess.Popen) -> None:
    """wait=True: one line saying what holds the lock, then the lock once the holder ends."""
    said: list[str] = []
    entered = threading.Event()

    def second() -> None:
        with machine_lock(wait=True, say=said.append):
            entered.set()

    thread = threading.Thread(target=second)
    thread.start()
    assert not entered.wait(1.0), "took a lock another process holds"
    assert len(said) == 1 and f"held by pid {held.pid}" in said[0]
    assert held.stdin is not None
    held.stdin.close()  # the holder exits: the kernel drops its lock
    held.wait()
    thread.join(10)
    assert entered.is_set()


def test_a_refused_invocation_exits_2_and_runs_nothing(
    held: subprocess.Popen, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """guarded(wait=False) under a held lock: exit status 2, the body never called."""
    monkeypatch.setattr("bench.harness.run.state_base", lambda: tmp_path)
    called = []
    status = guarded(tmp_path / "results", None, lambda t, d: called.append(1) or 0, wait=False)
    assert status == 2 and not called
    assert not (tmp_path / "results").exists()


def test_unit_tests_never_take_the_real_lock() -> None:
    """tests/bench/conftest.py points the lock elsewhere: fakes never wait for a real run."""
    assert os.environ.get(LOCK_ENV) and state.lock_path() != Path("/run/lock") / state.LOCK_NAME


def test_a_killed_harnesss_socket_directory_is_found_by_its_pid(tmp_path: Path) -> None:
    """PostgreSQL's socket directory is named by the harness's pid, so the one a killed
    harness left (its clean-up never ran: CI's kill during the seed left three in /tmp) is
    found at the next start; a live harness's, ours and anything else are never touched."""
    made = state.socket_dir()
    try:
        assert made.name.startswith(f"{state.SOCKET_PREFIX}{os.getpid()}-")
        assert made.stat().st_mode & 0o777 == 0o700
    finally:
        made.rmdir()
    dead, live = tmp_path / "pwb-pg-999999-ab1_c", tmp_path / "pwb-pg-4242-zz9"
    for path in (dead, live, tmp_path / f"pwb-pg-{os.getpid()}-me", tmp_path / "pwb-pg-x2kq"):
        path.mkdir()
    (tmp_path / "pwb-pg-999998-file").write_text("")  # not a directory
    assert state.socket_leftovers(tmp_path, alive=lambda pid: pid == 4242) == [dead]
    assert state.socket_leftovers(tmp_path, alive=lambda pid: True) == []
