"""`python -m bench run` end to end: real stack, real load, records and summary on disk."""

from pathlib import Path

import pytest

from bench.core.record import FORMAT_VERSION
from tests.conftest import stack_processes
from tests.integration.conftest import report_text, run_bench, trial_records

pytestmark = pytest.mark.integration


def test_short_bench_writes_ok_records_and_summary(tmp_path: Path) -> None:
    """granian on plaintext and db at c=10 for 2 s: two ok records with sane numbers, a
    summary that names both scenarios, raw wrk output beside them, nothing left running."""
    results = tmp_path / "results"
    before = set(stack_processes())
    proc = run_bench(
        results,
        server="granian",
        scenario="plaintext,db",
        concurrency=10,
        duration=2,
        warmup=0,
        trials=1,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "granian plaintext c=10" in proc.stderr  # the progress line
    records = trial_records(results)
    assert sorted(r["scenario"] for r in records) == ["db", "plaintext"]
    for rec in records:
        assert rec["status"] == "ok" and rec["reason"] is None
        assert rec["server"] == "granian" and rec["app"] == "wsgi" and rec["concurrency"] == 10
        assert rec["rps"] > 50 and rec["requests"] >= rec["rps"]  # measured, not typed in
        lat = rec["latency_ms"]
        assert 0 < lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["p999"] <= lat["max"]
        assert sum(rec["errors"][k] for k in ("connect", "read", "write", "timeout")) == 0
        assert rec["errors"]["non_2xx"] == 0
        assert rec["arch"] == rec["host_arch"] and rec["emulated"] is False
        assert rec["metadata"]["server_version"] == rec["metadata"]["packages"]["granian"]
        assert rec["metadata"]["cpu_count"] >= 1 and rec["metadata"]["hostname"]
        assert rec["format_version"] == FORMAT_VERSION
        assert rec["offered_rps"] is None and rec["achieved_rps"] is None  # closed loop
        assert rec["proxy"] is None and rec["keepalive"] == {"client": True, "upstream": None}
        assert rec["backlog"] == rec["knobs"]["backlog"]  # asked from the kernel
        assert rec["metadata"]["cpu_placement"]["pinned"] is False
        res, sockets = rec["resources"], rec["sockets"]
        assert res["server_cpu_pct"] > 1 and res["server_rss_mb"] > 10 and res["load_cpu_pct"] > 0
        assert set(sockets) == {
            "time_wait_before",
            "time_wait_max",
            "time_wait_after",
            "time_wait_client_max",
            "time_wait_upstream_max",
            "time_wait_db_max",
            "listen_queue_max",
            "listen_overflows",
            "listen_drops",
        }
        assert sockets["time_wait_upstream_max"] is None  # no proxy, no upstream side
        for raw in rec["raw_files"]:
            assert (results / raw).is_file()
    db_rec = next(r for r in records if r["scenario"] == "db")
    # every /db request is one query through pgbouncer: the DB really answered the load
    assert db_rec["db"]["queries"] >= db_rec["requests"]
    # pgbouncer's server connections were in use during the run (sampled from SHOW POOLS)
    assert db_rec["db"]["server_conns_max"] >= 1
    summary = report_text(results)
    assert "plaintext" in summary and "granian" in summary and "/db" in summary
    assert set(stack_processes()) - before == set()
