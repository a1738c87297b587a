"""Locust on the real stack: bench.load.run_locust directly (one process, master + 2 workers), and
`python -m bench run LOAD=locust` end to end."""

from pathlib import Path

import psutil
import pytest

from bench.host.procs import ProcessTable
from bench.host.venv import make_venv
from bench.load import Errors, LoadAborted
from bench.load.locust import LOCUST_DIR, parse_locust, parse_locust_tasks, run_locust
from bench.observe.sample import Sampler
from bench.stack.components import RunningServer
from tests.conftest import stack_processes
from tests.integration.conftest import run_bench, trial_records

pytestmark = pytest.mark.integration

TASKS = {
    "login (DB)",
    "plan generation (AI API, 3 s)",
    "history (DB)",
    "voice (speech API, 1 s)",
}


@pytest.fixture(scope="module")
def locust_python(run_dir: Path) -> Path:
    """Locust's venv (created once, then reused while requirements.txt is unchanged)."""
    return make_venv("_locust", LOCUST_DIR / "requirements.txt", log=run_dir / "locust-venv.log")


def _pids(table: ProcessTable) -> set[int]:
    return {proc.pid for proc in table.procs}


def _cmdlines() -> list[list[str]]:
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        if proc.info["status"] != psutil.STATUS_ZOMBIE:
            found.append(proc.info["cmdline"] or [])
    return found


@pytest.mark.parametrize("workers", [0, 2])
def test_run_locust_measures_the_saas_mix(
    workers: int,
    granian: RunningServer,
    locust_python: Path,
    table: ProcessTable,
    tmp_path: Path,
) -> None:
    """10 users for 8 s: every task answered 200, counted by status (by both workers when
    distributed), the load's CPU sampled over every Locust process, nothing left running."""
    before = _pids(table)
    sampler = Sampler(server_pid=granian.proc.pid, port=granian.port)
    out = run_locust(
        table,
        locust_python,
        f"http://127.0.0.1:{granian.port}",
        "saas",
        users=10,
        # a session's first three calls take 3 s and more before its voice call starts: at
        # 5 s a slow first /db (CI, a fresh stack) once left no voice call in the window
        duration_s=8,
        workers=workers,
        out_dir=tmp_path / "locust",
        sampler=sampler,
    )
    assert _pids(table) == before  # master and workers stopped and out of the table
    stats = (out / "locust_stats.csv").read_text()
    status = (out / "status.json").read_text()
    result = parse_locust(stats, status, 8)
    tasks = parse_locust_tasks(stats)
    assert set(tasks) == TASKS, stats
    assert all(t["requests"] > 0 and t["failures"] == 0 for t in tasks.values())
    # Every user does login (ms), plan (3 s), history (ms), voice (1 s), then thinks 1 s:
    # one session and the next one's first two calls in 8 s, each user's request in flight at
    # -t finishing within the stop timeout.
    assert 20 <= result.requests <= 10 * 10
    # The final statistics (rewritten at quitting) and the status counts are the same requests.
    assert result.errors.by_status == {200: result.requests}
    assert result.errors == Errors(by_status=result.errors.by_status)
    assert sum(t["requests"] for t in tasks.values()) == result.requests
    assert 3000 <= tasks["plan generation (AI API, 3 s)"]["p50_ms"] < 3500
    assert 1000 <= tasks["voice (speech API, 1 s)"]["p50_ms"] < 1500
    assert result.latency.max >= 3000
    assert sampler.resources().load_cpu_pct > 0
    # Distributed, each worker runs 5 of the 10 users: had one worker's status counts not
    # reached the master, by_status would hold about half the requests, not all of them.
    assert len(sampler.extra_load_pids) == workers
    assert not any(str(out) in " ".join(cmd) for cmd in _cmdlines())


def test_a_broken_stack_stops_locust_at_once(
    granian: RunningServer, locust_python: Path, table: ProcessTable, tmp_path: Path
) -> None:
    """When the watchdog reports a reason, every Locust process is stopped and LoadAborted
    raised, long before the run's end."""
    before = _pids(table)
    calls = []

    def watch() -> str | None:
        calls.append(1)
        return "server died" if len(calls) > 2 else None

    with pytest.raises(LoadAborted, match="server died"):
        run_locust(
            table,
            locust_python,
            f"http://127.0.0.1:{granian.port}",
            "saas",
            users=4,
            duration_s=60,
            workers=1,
            out_dir=tmp_path / "locust",
            watch=watch,
        )
    assert _pids(table) == before
    assert not any(str(tmp_path) in " ".join(cmd) for cmd in _cmdlines())


@pytest.mark.parametrize("workers", [0, 2])
def test_locust_runs_the_saas_mix_and_writes_a_record(workers: int, tmp_path: Path) -> None:
    """`python -m bench run LOAD=locust`: granian, 10 users for 8 s: an ok record made by
    Locust, per-task statistics, responses counted by status (by both workers when
    distributed), the load's CPU measured over every Locust process, nothing left running."""
    results = tmp_path / "results"
    before = set(stack_processes())
    proc = run_bench(
        results,
        server="granian",
        load="locust",
        locust_workers=workers,
        concurrency=10,
        # a session's four calls take 4 s and more on a busy machine: 8 s let every task
        # complete at least once
        duration=8,
        warmup=0,
        trials=1,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    (rec,) = trial_records(results)
    assert rec["status"] == "ok" and rec["scenario"] == "saas"
    assert rec["load_tool"] == "locust" and rec["load_tool_version"]
    assert rec["load_workers"] == workers and rec["load_threads"] is None
    assert set(rec["tasks"]) == TASKS and rec["requests"] > 10
    assert rec["tasks"]["login (DB)"]["failures"] == 0
    assert rec["errors"]["by_status"]["200"] == rec["requests"]
    assert rec["latency_ms"]["p99"] >= 3000  # the plan call takes 3 s
    assert rec["resources"]["load_cpu_pct"] > 0
    assert rec["db"]["queries"] >= rec["tasks"]["login (DB)"]["requests"]
    assert any(raw.endswith("locust_stats.csv") for raw in rec["raw_files"])
    assert set(stack_processes()) == before
