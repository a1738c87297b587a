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
