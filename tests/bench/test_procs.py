"""Process ownership: a stopped component leaves no process of its group behind."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from bench.host import ready
from bench.host.procs import ProcessTable, StartError, process_tree
from tests.conftest import alive


def test_stop_ends_children_whose_leader_was_killed(tmp_path: Path) -> None:
    """Like gunicorn workers after kill -9 of their master: the group is still ended."""
    table = ProcessTable()
    proc = table.start("family", ["bash", "-c", "sleep 300 & sleep 300 & wait"], tmp_path / "l")
    ready.wait_until(lambda: len(process_tree(proc.pid)) == 3, "forked", proc, 10)
    family = process_tree(proc.pid)
    os.kill(proc.pid, signal.SIGKILL)
    table.stop(proc, grace_s=2)
    assert alive(family) == set()
    assert table.procs == []


def test_stop_all_stops_everything_newest_first_and_runs_cleanups(tmp_path: Path) -> None:
    """stop_all ends every component, then runs the registered cleanups."""
    table = ProcessTable()
    started = [table.start(f"p{i}", ["sleep", "300"], tmp_path / f"{i}.log") for i in range(3)]
    cleaned: list[str] = []
    table.on_stop(lambda: cleaned.append("done"))
    table.stop_all(grace_s=2)
    assert all(p.exit_code() is not None for p in started)
    assert cleaned == ["done"] and table.procs == []


def test_a_component_that_ignores_sigterm_is_killed_at_the_deadline(tmp_path: Path) -> None:
    """Polite first, then SIGKILL: a stuck process cannot hold the run hostage."""
    table = ProcessTable()
    proc = table.start(
        "stubborn", ["bash", "-c", "trap '' TERM; sleep 300 & wait"], tmp_path / "s.log"
    )
    ready.wait_until(lambda: len(process_tree(proc.pid)) == 2, "forked", proc, 10)
    family = process_tree(proc.pid)
    table.stop(proc, grace_s=0.5)  # returns only once the group is gone (SIGKILL after 0.5 s)
    assert alive(family) == set()


def test_a_component_that_exits_early_is_reported_with_its_log(tmp_path: Path) -> None:
    """Readiness fails at once, with the exit code and the log tail, not after the timeout."""
    table = ProcessTable()
    proc = table.start("crasher", ["bash", "-c", "echo boom >&2; exit 3"], tmp_path / "c.log")
    with pytest.raises(StartError, match=r"exited with code 3[\s\S]*boom"):
        ready.wait_until(lambda: False, "ready", proc, timeout_s=30)
    table.stop_all()


def test_sigint_interrupts_even_when_it_arrived_ignored() -> None:
    """A harness started as a background job inherits SIGINT ignored; inside signals_raise a
    SIGINT still raises KeyboardInterrupt (so the run is recorded and the stack stopped)."""
    code = (
        "import os, signal\n"
        "from bench.host.procs import signals_raise\n"
        "assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN\n"
        "try:\n"
        "    with signals_raise():\n"
        "        os.kill(os.getpid(), signal.SIGINT)\n"
        "        raise SystemExit(3)\n"
        "except KeyboardInterrupt:\n"
        "    raise SystemExit(130)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=Path(__file__).resolve().parents[2],
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
        capture_output=True,
        text=True,
    )
    assert result.returncode == 130, result.stderr


def test_an_interrupt_swallowed_by_an_at_fork_hook_is_raised_again(tmp_path: Path) -> None:
    """A SIGINT whose handler runs inside one of CPython's at-fork hooks (run for a Popen with
    a preexec_fn; logging registers one) is printed as "Exception ignored" and lost: start()
    raises it again once the new process is in the table, so stop_all stops it. In a process
    of its own: an at-fork hook cannot be unregistered."""
    code = (
        "import os, signal, sys\n"
        "from pathlib import Path\n"
        "from bench.host.procs import ProcessTable, signals_raise\n"
        "armed = []\n"
        "def hook():\n"
        "    if armed:\n"
        "        armed.clear()\n"
        "        os.kill(os.getpid(), signal.SIGINT)\n"
        "        for _ in range(1000):  # the handler runs here, inside the hook\n"
        "            pass\n"
        "os.register_at_fork(after_in_parent=hook)\n"
        "table = ProcessTable()\n"
        "try:\n"
        "    with signals_raise():\n"
        "        armed.append(1)\n"
        "        table.start('sleep', ['sleep', '30'], Path(sys.argv[1]))\n"
        "        print('went on', flush=True)\n"
        "except KeyboardInterrupt:\n"
        "    print('interrupted', [p.name for p in table.procs], flush=True)\n"
        "finally:\n"
        "    table.stop_all()\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "sleep.log")],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "Exception ignored" in result.stderr, result.stderr  # the hook did swallow it
    assert result.stdout == "interrupted ['sleep']\n", result.stderr
