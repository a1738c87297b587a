"""Study arms in a network namespace (bench/studies/namespace.py): port exhaustion on a tiny
range. Needs root (skipped otherwise)."""

from pathlib import Path

import pytest

from bench.core import studyfile
from bench.host import netns
from bench.host.procs import ProcessTable
from bench.studies import schema
from bench.studies.arms import arm_options, base_options
from bench.studies.namespace import ArmRun, measure_arm

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(netns.root_problem() is not None, reason="network namespaces need root"),
]

ERRNO_99 = "(99: Cannot assign requested address)"


# Two arms in the study files' schema: nginx in front with upstream keep-alive off and on.
STUDY = """
title = "t"
source = "s"
claim = "c"
differs = "d"
expect = "e"

[run]
namespace = true
proxy = "nginx"
scenario = "plaintext"
# 64 local ports, no TIME_WAIT re-use: 64 upstream connections use them all up.
sysctls = { "net.ipv4.ip_local_port_range" = "40000 40063", "net.ipv4.tcp_tw_reuse" = "0" }
concurrency = [4]
duration = 3
load_timeout = 5
proxy_timeout = 5

[[arm]]
id = "ka-False"
server = "gunicorn-gthread"
load = "oha"
rates = [200]
knobs = { workers = 1, threads = 4 }
upstream_keepalive = false

[[arm]]
id = "ka-True"
server = "gunicorn-gthread"
load = "oha"
rates = [200]
knobs = { workers = 1, threads = 4 }
upstream_keepalive = true
"""


def _measure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, table: ProcessTable
) -> tuple[ArmRun, ArmRun]:
    (tmp_path / "tiny.toml").write_text(STUDY)
    monkeypatch.setattr(studyfile, "STUDIES_DIR", tmp_path)
    study = schema.load_study("tiny")
    base = base_options(tmp_path / "results", 1)
    spaces = netns.Namespaces(table)
    runs = [
        measure_arm(
            table, spaces, study, arm, arm_options(study, arm, base, "r1"), tmp_path / arm.id
        )
        for arm in study.arms
    ]
    return runs[0], runs[1]


def test_tiny_port_range_exhausted_without_upstream_keepalive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """64 ports, 200 req/s for 3 s through nginx: with upstream keep-alive off nginx's
    connects fail with errno 99 and the client gets 502s; with it on, every answer is a 200
    and the error log has no errno 99. The namespaces are gone afterwards."""
    table = ProcessTable()
    try:
        off, on = _measure(tmp_path, monkeypatch, table)
    finally:
        table.stop_all()
    assert not [n for n in netns.list_namespaces() if n in (off.network or {}).get("namespace", "")]
    reasons_off = off.network["proxy_error_reasons"]
    exhausted = sum(n for reason, n in reasons_off.items() if ERRNO_99 in reason)
    assert exhausted > 0, reasons_off
    assert off.proxy_statuses.get(502, 0) >= exhausted
    assert off.network["time_wait_max"] >= 60  # the range (64) sits in TIME_WAIT
    assert off.network["sysctls"]["net.ipv4.ip_local_port_range"] == "40000 40063"
    assert not any(ERRNO_99 in reason for reason in on.network["proxy_error_reasons"])
    assert on.proxy_statuses.get(502, 0) == 0
    assert '"200"' in on.oha_json and '"502"' not in on.oha_json


def test_alb_front_in_a_bench_run(tmp_path: Path) -> None:
    """`make bench PROXY=alb`: the run goes through the ALB-like nginx (its site config is the
    ALB template: no retry, 60 s upstream idle timeout) and the record says proxy "alb" with
    upstream keep-alive on."""

    from tests.integration.conftest import run_bench, trial_records

    results = tmp_path / "results"
    proc = run_bench(
        results,
        server="granian",
        scenario="plaintext",
        concurrency=5,
        duration=2,
        warmup=0,
        trials=1,
        proxy="alb",
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    (rec,) = trial_records(results)
    assert rec["status"] == "ok" and rec["proxy"] == "alb"
    assert rec["keepalive"] == {"client": True, "upstream": True}
    assert rec["requests"] > 0 and rec["metadata"]["proxy_version"]
