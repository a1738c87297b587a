"""LOAD=locust: the SaaS mix through Locust, one process or master + workers, for real."""

import json
from pathlib import Path

import pytest

from tests.conftest import stack_processes
from tests.integration.conftest import run_bench

pytestmark = pytest.mark.integration

TASKS = {"login (DB)", "plan generation (AI API, 3 s)"}


@pytest.mark.parametrize("workers", [0, 2])
def test_locust_runs_the_saas_mix_and_writes_a_record(workers: int, tmp_path: Path) -> None:
    """granian, 10 users for 5 s (a 3 s plan call in every session): an ok record made by
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
        duration=5,
        warmup=0,
        trials=1,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    (rec,) = [json.loads(p.read_text()) for p in (results / "records").glob("*.json")]
    assert rec["status"] == "ok" and rec["scenario"] == "saas"
    assert rec["load_tool"] == "locust" and rec["load_tool_version"]
    assert rec["load_workers"] == workers and rec["load_threads"] is None
    assert set(rec["tasks"]) >= TASKS and rec["requests"] > 10
    assert rec["tasks"]["login (DB)"]["failures"] == 0
    assert rec["errors"]["by_status"]["200"] >= rec["requests"] - 10
    assert rec["latency_ms"]["p99"] >= 3000  # the plan call takes 3 s
    assert rec["resources"]["load_cpu_pct"] > 0
    assert rec["db"]["queries"] >= rec["tasks"]["login (DB)"]["requests"]
    assert any(raw.endswith("locust_stats.csv") for raw in rec["raw_files"])
    assert set(stack_processes()) == before
