"""The PostgreSQL cluster's first build under faults: a harness interrupted during initdb or
the seed leaves no cluster the next run would reuse, and the next run builds a working one.

Each test drives the real stack (bench.stack.components.Stack.start_database, as `make bench`
starts it) in a process of its own on a cluster of its own, injects the fault when the step
it aims at is running (an `initdb` or a `psql` among its descendants), then starts it again.
"""

import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from bench.cli.cleanup import remove_leftovers
from bench.core.registry import ROOT
from bench.host.state import socket_leftovers, state_base
from bench.stack.components import BUILD_SUFFIX, CLUSTER_COMPLETE
from tests.conftest import alive

pytestmark = pytest.mark.integration

# What `make bench` does first: the database started (built on first use), one query, stopped.
DRIVER = """
import sys
from pathlib import Path
from bench.host.procs import ProcessTable
from bench.stack.components import Stack

table = ProcessTable()
try:
    db = Stack(table, Path(sys.argv[2]), cluster_name=sys.argv[1]).start_database()
    print("world rows", len(db.world()), flush=True)
finally:
    table.stop_all()
"""


@pytest.fixture
def cluster() -> Iterator[str]:
    """A cluster name of this test's own; its directory, build leftovers, lock and the
    pgbouncer files the stack keeps under .bench/runs/<run dir name> removed."""
    name = f"pg-init-{uuid.uuid4().hex[:8]}"
    yield name
    base = state_base()
    for path in [base / name, *base.glob(f"{name}{BUILD_SUFFIX}*"), *base.glob(f"runs/{name}-*")]:
        shutil.rmtree(path, ignore_errors=True)
    (base / f"{name}.lock").unlink(missing_ok=True)


def _start(name: str, where: Path) -> subprocess.Popen:
    run_dir = where / f"{name}-{where.name}"  # its name is reused under .bench/runs/
    run_dir.mkdir(parents=True, exist_ok=True)
    run_dir.chmod(0o755)  # the postgres user writes its log here when we are root
    return subprocess.Popen(
        [sys.executable, "-c", DRIVER, name, str(run_dir)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group: Ctrl-C reaches it and its children
        # SIGINT at its default, as a terminal's shell starts a foreground job, whatever the
        # runner left (one that starts the suite with SIGINT ignored would hide Ctrl-C here)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def _wait_for(harness: subprocess.Popen, word: str) -> list[psutil.Process]:
    """The harness's descendants once one of them runs `word` (polled every few ms)."""
    parent = psutil.Process(harness.pid)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert harness.poll() is None, harness.communicate()
        family = parent.children(recursive=True)
        for proc in family:
            try:
                if Path(proc.cmdline()[0]).name == word:
                    return family
            except (psutil.Error, IndexError):
                continue
        time.sleep(0.005)
    raise AssertionError(f"no {word} ever ran")


def _socket_dir_removed(pid: int) -> None:
    """The killed harness's PostgreSQL socket directory, named by its pid, is found and
    removed by the clean-up every command runs first (CI's two kills here left theirs in
    /tmp)."""
    left = [p for p in socket_leftovers() if p.name.startswith(f"pwb-pg-{pid}-")]
    assert len(left) == 1
    remove_leftovers()
    assert not left[0].exists()


def _next_run_works(name: str, run_dir: Path) -> str:
    """The next start builds the cluster and answers: 10,000 world rows; its stderr."""
    harness = _start(name, run_dir)
    out, err = harness.communicate(timeout=300)
    assert harness.returncode == 0, err[-2000:]
    assert "world rows 10000" in out
    assert (state_base() / name / CLUSTER_COMPLETE).is_file()
    assert not list(state_base().glob(f"{name}{BUILD_SUFFIX}*"))
    return err


def test_ctrl_c_during_initdb_leaves_no_cluster(cluster: str, tmp_path: Path) -> None:
    """SIGINT to the process group while initdb runs, as Ctrl-C in a terminal sends it: the
    harness stops, no cluster and no half-built directory are left, nothing runs; the next
    run builds the cluster."""
    harness = _start(cluster, tmp_path / "run1")
    family = _wait_for(harness, "initdb")
    os.killpg(harness.pid, signal.SIGINT)
    harness.communicate(timeout=60)
    assert harness.returncode != 0
    assert alive({p.pid for p in family}) == set()
    assert not (state_base() / cluster).exists()
    assert not list(state_base().glob(f"{cluster}{BUILD_SUFFIX}*"))
    _next_run_works(cluster, tmp_path / "run2")


def test_kill_during_the_seed_is_rebuilt_by_the_next_run(cluster: str, tmp_path: Path) -> None:
    """SIGKILL to the harness and everything it started while the seed's psql runs (a power
    cut, an OOM kill: no clean-up runs): what is left is only the build directory, never the
    cluster; the next run removes it and builds a working cluster."""
    harness = _start(cluster, tmp_path / "run1")
    family = _wait_for(harness, "psql")
    for proc in [psutil.Process(harness.pid), *family]:
        proc.send_signal(signal.SIGKILL)
    harness.communicate(timeout=60)
    deadline = time.monotonic() + 10
    while alive({p.pid for p in family}) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert alive({p.pid for p in family}) == set()
    assert not (state_base() / cluster).exists()
    assert list(state_base().glob(f"{cluster}{BUILD_SUFFIX}*")), "the build left no trace"
    _socket_dir_removed(harness.pid)
    _next_run_works(cluster, tmp_path / "run2")


def test_a_cluster_without_its_marker_is_rebuilt(cluster: str, tmp_path: Path) -> None:
    """A cluster as an interrupted first run left it before the marker existed (initdb done,
    nothing seeded, only template1): removed and rebuilt, saying so, and the next run works."""
    harness = _start(cluster, tmp_path / "run1")
    family = _wait_for(harness, "psql")
    for proc in [psutil.Process(harness.pid), *family]:
        proc.send_signal(signal.SIGKILL)
    harness.communicate(timeout=60)
    _socket_dir_removed(harness.pid)
    (left,) = state_base().glob(f"{cluster}{BUILD_SUFFIX}*")
    (left / CLUSTER_COMPLETE).unlink(missing_ok=True)
    left.rename(state_base() / cluster)
    err = _next_run_works(cluster, tmp_path / "run2")
    assert "is incomplete" in err and "rebuilding it" in err
