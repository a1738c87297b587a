"""The real stack for integration tests: PostgreSQL + pgbouncer + upstream stub, once a session."""

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.core import registry
from bench.core.registry import ROOT
from bench.host.procs import ProcessTable
from bench.host.venv import ensure_venv
from bench.stack.components import Database, RunningServer, Stack


def bench_command(results: Path, **options: object) -> list[str]:
    """`python -m bench run` with options (underscores become dashes) and RESULTS."""
    flags = [f"--{name.replace('_', '-')}={value}" for name, value in options.items()]
    return [sys.executable, "-m", "bench", "run", *flags, f"--results={results}"]


def run_bench(results: Path, **options: object) -> subprocess.CompletedProcess:
    """Run the harness to completion (bounded: 5 minutes) and capture its output."""
    return subprocess.run(
        bench_command(results, **options), cwd=ROOT, capture_output=True, text=True, timeout=300
    )


def trial_records(results: Path, skip: tuple[str, ...] = ()) -> list[dict]:
    """The records of the planned trials, by file name: each server's warm-up start (trial 0)
    and a run under foreign load that a repeat replaced (this machine is shared) left out."""
    found = [
        json.loads(p.read_text())
        for p in sorted((results / "records").glob("*.json"))
        if p.name not in skip
    ]
    replaced = {r["metadata"].get("repeat_of") for r in found}
    return [
        r for r in found if not r["metadata"].get("warmup_start") and r["run_id"] not in replaced
    ]


@pytest.fixture(scope="session")
def table() -> Iterator[ProcessTable]:
    """The session's process table; everything in it is stopped at the end."""
    procs = ProcessTable()
    yield procs
    procs.stop_all()


@pytest.fixture(scope="session")
def stack(table: ProcessTable, tmp_path_factory: pytest.TempPathFactory) -> Stack:
    """A Stack whose logs go to a temporary run directory."""
    run_dir = tmp_path_factory.mktemp("run")
    run_dir.chmod(0o755)
    return Stack(table, run_dir, cluster_name="pg-tests")


@pytest.fixture(scope="session")
def db(stack: Stack) -> Database:
    """PostgreSQL (seeded) behind pgbouncer, and the upstream stub, all answering."""
    database = stack.start_database()
    stack.start_upstream(sys.executable)
    return database


@pytest.fixture(scope="session")
def run_dir(stack: Stack) -> Path:
    """Where the stack's logs go."""
    return stack.run_dir


@pytest.fixture(scope="module")
def granian(stack: Stack, db: Database) -> Iterator[RunningServer]:
    """granian WSGI, 1 worker, 16 threads: the load tools' tests (10 Locust users or 10 oha
    connections never queue for a thread)."""
    spec = registry.load_spec(registry.SERVERS_DIR / "granian" / "server.toml")
    knobs = registry.resolve_knobs(spec, 1, {"workers": 1, "threads": 16})
    server = stack.start_server(spec, knobs, ensure_venv(spec), db, "granian-w1t16.log")
    yield server
    stack.stop_server(server)


def report_text(results: Path) -> str:
    """summary.md and every detail file it links (RESULTS/details/), as one text: what a
    reader of the report sees, wherever a section now lives."""
    details = sorted((results / "details").glob("*.md"))
    return "\n".join(p.read_text() for p in [results / "summary.md", *details])
