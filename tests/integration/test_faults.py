"""The harness under faults: each exit path leaves nothing running, records the failure with
its reason, and leaves earlier records byte-identical.

Each test runs the real harness (`python -m bench run`, 40 s of load planned), waits until the
measured load is under way, injects one fault, and checks what is left afterwards.
"""

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from bench.core.registry import ROOT
from bench.host.state import LOCK_ENV
from tests.conftest import alive
from tests.integration.conftest import bench_command, trial_records

pytestmark = pytest.mark.integration
EARLIER = ROOT / "tests" / "fixtures" / "records" / "machine-a" / "rec0.json"


def _run_with_fault(
    tmp_path: Path,
    pick: Callable[[psutil.Process, list[psutil.Process]], None],
    background: bool = False,
) -> tuple[int, list[dict], str, Path]:
    """Start the harness, wait for the measured load, call pick(harness, descendants).
    `background`: started as a shell starts a background job, with SIGINT ignored."""
    results = tmp_path / "results"
    (results / "records").mkdir(parents=True)
    earlier = results / "records" / "earlier.json"
    shutil.copy(EARLIER, earlier)
    log = tmp_path / "stderr.txt"
    with open(log, "w") as err:
        harness = subprocess.Popen(
            bench_command(
                results,
                server="gunicorn-sync",
                scenario="db",
                concurrency=10,
                # the warm-up start's run comes first, whole: 15 s each is ample room for a
                # fault 2.5 s into the trial's (40 s cost CI about 3 minutes over the file)
                duration=15,
                warmup=0,
                trials=1,
            ),
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=err,
            preexec_fn=(lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
            if background
            else None,
        )
    try:
        deadline = time.monotonic() + 240  # the warm-up start's run first: DURATION long
        # the trial's run, past the warm-up start's
        while "gunicorn-sync db c=10 trial 1/" not in log.read_text():
            assert harness.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "the load never started"
            time.sleep(0.1)
        time.sleep(2.5)  # past the 1 s primer and the drain: inside the measured run
        parent = psutil.Process(harness.pid)
        family = parent.children(recursive=True)
        pids = {p.pid for p in family}
        started = time.monotonic()
        pick(parent, family)
        code = harness.wait(timeout=60)
        assert time.monotonic() - started < 60
    finally:
        if harness.poll() is None:
            harness.kill()
    assert alive(pids) == set(), f"left running: {alive(pids)}"
    records = trial_records(results, skip=("earlier.json",))
    assert earlier.read_bytes() == EARLIER.read_bytes(), "an earlier record was modified"
    assert (results / "summary.md").exists()
    return code, records, log.read_text(), results


def _one(family: list[psutil.Process], word: str, parent_pid: int | None = None) -> psutil.Process:
    found = [
        p
        for p in family
        if word in " ".join(p.cmdline()) and (parent_pid is None or p.ppid() == parent_pid)
    ]
    assert found, f"no {word} process among {[p.cmdline()[:3] for p in family]}"
    return found[0]


def test_server_master_killed(tmp_path: Path) -> None:
    """kill -9 of the gunicorn master: failed record 'exited with code -9', workers gone."""
    code, records, _, _ = _run_with_fault(
        tmp_path, lambda h, fam: _one(fam, "gunicorn", h.pid).send_signal(signal.SIGKILL)
    )
    assert code == 1
    assert [r["status"] for r in records] == ["failed"]
    assert "server exited with code -9 during load" in records[0]["reason"]
    assert records[0]["raw_files"], "the server log is kept beside the failed record"


def test_server_worker_killed(tmp_path: Path) -> None:
    """kill -9 of one gunicorn worker: the run is void even though the master respawns it."""

    def kill_worker(harness: psutil.Process, family: list[psutil.Process]) -> None:
        master = _one(family, "gunicorn", harness.pid)
        _one(family, "gunicorn", master.pid).send_signal(signal.SIGKILL)

    code, records, _, _ = _run_with_fault(tmp_path, kill_worker)
    assert code == 1
    assert "died during load" in records[0]["reason"]


def test_postgres_killed(tmp_path: Path) -> None:
    """kill -9 of the postmaster: failed record naming postgres, logs kept, nothing left."""
    code, records, _err, _results = _run_with_fault(
        tmp_path, lambda h, fam: _one(fam, "postgres -D", h.pid).send_signal(signal.SIGKILL)
    )
    assert code == 1
    assert "postgres exited with code -9" in records[0]["reason"]
    assert any(f.endswith("postgres.log") for f in records[0]["raw_files"])


@pytest.mark.parametrize(
    ("sig", "background"),
    [(signal.SIGINT, False), (signal.SIGTERM, False), (signal.SIGINT, True)],
)
def test_harness_interrupted(tmp_path: Path, sig: signal.Signals, background: bool) -> None:
    """Ctrl-C or SIGTERM to the harness (also a background job, SIGINT inherited ignored):
    exit 130, the interrupted run recorded as failed and named in the one line."""
    code, records, err, _ = _run_with_fault(
        tmp_path, lambda h, fam: os.kill(h.pid, sig), background
    )
    assert code == 130
    assert [r["status"] for r in records] == ["failed"]
    assert f"interrupted by {sig.name}" in records[0]["reason"]
    assert (
        f"interrupted by {sig.name}; cut short: gunicorn-sync db c=10 trial 1; stopping everything"
        in err
    )


def _quick_command(results: Path) -> list[str]:
    return bench_command(
        results,
        server="nginx-static",
        scenario="plaintext",
        concurrency=2,
        duration=1,
        warmup=0,
        trials=1,
    )


def _quick_run(results: Path, lock: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        _quick_command(results),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, LOCK_ENV: str(lock)},
    )


def _hold_lock(lock: Path) -> subprocess.Popen:
    """Another harness holding the machine's lock, as a run from another checkout would (the
    lock file is the test's own: real runs on this machine are neither held up nor seen)."""
    code = (
        "import sys; from bench.host.state import machine_lock; "
        "lock = machine_lock(wait=False); lock.__enter__(); print('held', flush=True); "
        "sys.stdin.read()"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env={**os.environ, LOCK_ENV: str(lock)},
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == b"held"
    return holder


def test_second_run_waits_while_the_first_holds_the_lock(tmp_path: Path) -> None:
    """Two harnesses on one machine: the second says once what holds the lock (pid, checkout,
    since when), measures nothing while it is held, then runs when it is released."""
    lock = tmp_path / "machine.lock"
    holder = _hold_lock(lock)
    results = tmp_path / "results"
    log = tmp_path / "stderr.txt"
    try:
        with open(log, "w") as err:
            second = subprocess.Popen(
                _quick_command(results),
                cwd=ROOT,
                stdout=subprocess.DEVNULL,
                stderr=err,
                env={**os.environ, LOCK_ENV: str(lock)},
            )
        deadline = time.monotonic() + 60
        while "waiting for" not in log.read_text():
            assert second.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "the second harness never said it waits"
            time.sleep(0.1)
        time.sleep(2)
        assert second.poll() is None and not (results / "records").exists()
        [line] = [x for x in log.read_text().splitlines() if "waiting for" in x]
        assert f"pid {holder.pid}, checkout {ROOT}, since " in line
    finally:
        holder.kill()
        holder.wait()
    assert second.wait(timeout=300) == 0, log.read_text()[-1000:]
    assert len(trial_records(results)) == 1


def test_lock_of_a_killed_run_is_not_stale(tmp_path: Path) -> None:
    """A run killed with SIGKILL leaves no stale lock: the kernel drops it with the process."""
    lock = tmp_path / "machine.lock"
    holder = _hold_lock(lock)
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    result = _quick_run(tmp_path / "results", lock)
    assert result.returncode == 0, result.stderr[-1000:]
    assert "waiting for" not in result.stderr


def test_second_ctrl_c_does_not_cut_the_clean_up_short(tmp_path: Path) -> None:
    """Ctrl-C pressed twice: the clean-up still stops everything and the run is recorded."""

    def twice(harness: psutil.Process, _family: list[psutil.Process]) -> None:
        os.kill(harness.pid, signal.SIGINT)
        time.sleep(0.2)
        if harness.is_running():
            os.kill(harness.pid, signal.SIGINT)

    code, records, _err, _results = _run_with_fault(tmp_path, twice)
    assert code == 130
    assert "interrupted by SIGINT" in records[0]["reason"]


def test_ctrl_c_before_any_record_keeps_the_users_summary(tmp_path: Path) -> None:
    """Ctrl-C while the shared stack starts (nothing measured, nothing recorded): exit 130, the
    line names the stage, the user's summary.md and index.html stay byte for byte, nothing
    is left running."""
    results = tmp_path / "results"
    results.mkdir()
    (results / "summary.md").write_text("the user's summary\n")
    (results / "index.html").write_text("<p>the user's page</p>\n")
    log = tmp_path / "stderr.txt"
    with open(log, "w") as err:
        harness = subprocess.Popen(
            bench_command(
                results, server="gunicorn-sync", scenario="db", concurrency=10, duration=5
            ),
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    try:
        deadline = time.monotonic() + 120
        while "starting the shared stack" not in log.read_text():
            assert harness.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "the stack never started"
            time.sleep(0.01)
        family = {p.pid for p in psutil.Process(harness.pid).children(recursive=True)}
        os.kill(harness.pid, signal.SIGINT)
        code = harness.wait(timeout=60)
    finally:
        if harness.poll() is None:
            harness.kill()
    err_text = log.read_text()
    assert code == 130, err_text
    assert "interrupted by SIGINT; cut short: starting the shared stack;" in err_text
    assert "summary.md left as it was" in err_text
    assert (results / "summary.md").read_text() == "the user's summary\n"
    assert (results / "index.html").read_text() == "<p>the user's page</p>\n"
    assert not (results / "records").exists() or not list((results / "records").iterdir())
    assert alive(family) == set()
