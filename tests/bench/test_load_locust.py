"""Locust's statistics -> the record's numbers, over real captures (tests/fixtures/locust).

The captures: granian (1 worker, 16 threads) on the real stack, locust/saas.py with 10
users for 5 s, one Locust process (`local_*`) and a master with 2 workers (`distributed_*`);
and 2 users for 2 s against a port nobody listens on (`refused_*`).
"""

from pathlib import Path

import pytest

import bench.core.parse
from bench.load import Errors
from bench.load.locust import parse_locust, parse_locust_tasks

LOCUST = Path(__file__).resolve().parent.parent / "fixtures" / "locust"
TASKS = ["history (DB)", "login (DB)", "plan generation (AI API, 3 s)", "voice (speech API, 1 s)"]


def _capture(name: str) -> tuple[str, str]:
    return (LOCUST / f"{name}_stats.csv").read_text(), (LOCUST / f"{name}_status.json").read_text()


def test_local_run_reads_the_aggregated_row() -> None:
    """One session per user (login, 3 s plan, history, 1 s voice, 1 s think): 40 responses,
    all 200; Locust's percentiles are its buckets (100% says 3000), mean and max are exact."""
    result = parse_locust(*_capture("local"), 5)
    assert (result.requests, result.rps, result.duration_s) == (40, 8.0, 5)
    assert result.latency.p50 == 1000 and result.latency.p90 == 3000
    assert result.latency.p99 == 3000 and result.latency.p999 == 3000
    assert 3014 < result.latency.max < 3015 and 1017 < result.latency.mean < 1018
    assert result.errors == Errors(by_status=result.errors.by_status)
    assert result.errors.by_status == {200: 40} and result.bytes is None


def test_distributed_run_sums_the_workers() -> None:
    """Master + 2 workers (5 users each): the status counts both workers sent add up to the
    master's request count."""
    result = parse_locust(*_capture("distributed"), 5)
    assert result.requests == 40 and result.errors.by_status == {200: 40}


def test_tasks_are_reported_one_by_one() -> None:
    """The four steps of the paper's session, each with its own count and latency."""
    tasks = parse_locust_tasks(_capture("local")[0])
    assert sorted(tasks) == TASKS
    assert all(t["requests"] == 10 and t["failures"] == 0 for t in tasks.values())
    plan = tasks["plan generation (AI API, 3 s)"]
    assert plan["p50_ms"] == 3000 and plan["p99_ms"] == 3000 and 3009 < plan["mean_ms"] < 3010
    assert tasks["login (DB)"]["p50_ms"] == 41 and 2.43 < tasks["login (DB)"]["rps"] < 2.44


def test_refused_connections_are_connect_errors_not_requests() -> None:
    """Nothing listening: Locust counts 16 failed requests, all status 0; the record says 0
    requests, 16 connect errors and no latency (no response, no sample)."""
    stats, status = _capture("refused")
    result = parse_locust(stats, status, 2)
    assert (result.requests, result.rps) == (0, 0.0)
    assert result.errors.connect == 16 and result.errors.by_status == {}
    assert set(result.latency.to_dict().values()) == {None}
    assert all(t["failures"] == t["requests"] == 4 for t in parse_locust_tasks(stats).values())


def test_non_2xx_and_no_response_are_split() -> None:
    """Status 0 is a connect error and no response; 502 is a response outside 2xx."""
    result = parse_locust(_capture("local")[0], '{"200": 34, "0": 4, "502": 2}', 5)
    assert result.requests == 36 and result.errors.connect == 4
    assert result.errors.non_2xx == 2 and result.errors.by_status == {200: 34, 502: 2}


def test_without_status_counts_the_csv_alone_is_used() -> None:
    """No status.json (a run that died before quitting): requests from the CSV, no by_status."""
    result = parse_locust(_capture("local")[0], None, 5)
    assert result.requests == 40 and result.errors.by_status == {}


@pytest.mark.parametrize(
    ("stats", "status"),
    [
        ("", None),
        ("not,a,locust\n1,2,3\n", None),
        ("Type,Name,Request Count\n", None),
        ("Type,Name,Request Count\nGET,login (DB),12\n", None),  # no Aggregated row
        ("Type,Name,Request Count\n,Aggregated,many\n", None),
        (None, "not json"),
        (None, '["200", 3]'),
        (None, '{"OK": 3}'),
    ],
)
def test_not_locust_output_is_refused(stats: str | None, status: str | None) -> None:
    """Anything but Locust's stats CSV with an Aggregated row, or status counts that are not
    {status: count}, is a ParseError."""
    with pytest.raises(bench.core.parse.ParseError):
        parse_locust(_capture("local")[0] if stats is None else stats, status, 5)


def test_a_task_row_with_a_bad_count_is_refused() -> None:
    """parse_locust_tasks refuses what parse_locust refuses."""
    with pytest.raises(bench.core.parse.ParseError):
        parse_locust_tasks("Type,Name,Request Count,Failure Count\nGET,login,x,0\n")
