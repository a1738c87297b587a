"""Locust's statistics -> the record's numbers, over real captures (tests/fixtures/locust)."""

from pathlib import Path

import pytest

from bench.parse import ParseError, parse_locust, parse_locust_tasks

LOCUST = Path(__file__).resolve().parent.parent / "fixtures" / "locust"


def test_local_run_reads_the_aggregated_row() -> None:
    """granian, 20 SaaS users, 10 s, one Locust process: 104 requests, all 200 (108 counted
    by status: the users' last requests finish inside Locust's stop timeout), Locust's coarse
    percentiles kept as they are (1,000 ms buckets above 1 s)."""
    result = parse_locust(
        (LOCUST / "local_stats.csv").read_text(), (LOCUST / "local_status.json").read_text(), 10
    )
    assert (result.requests, round(result.rps, 1)) == (104, 10.4)
    assert result.latency_ms["p50"] == 1000 and result.latency_ms["p99"] == 9000
    assert result.latency_ms["max"] == 12000 and 2243 < result.latency_ms["mean"] < 2244
    assert result.errors == {"connect": 0, "read": 0, "write": 0, "timeout": 0, "non_2xx": 0}
    assert result.by_status == {200: 108}


def test_tasks_are_reported_one_by_one() -> None:
    """The four steps of the paper's session, each with its own latency."""
    tasks = parse_locust_tasks((LOCUST / "local_stats.csv").read_text())
    assert sorted(tasks) == [
        "history (DB)",
        "login (DB)",
        "plan generation (AI API, 3 s)",
        "voice (speech API, 1 s)",
    ]
    assert tasks["login (DB)"]["requests"] == 27 and tasks["login (DB)"]["p50_ms"] == 37
    assert tasks["plan generation (AI API, 3 s)"]["p50_ms"] >= 3000  # the 3 s call


def test_distributed_run_sums_the_workers() -> None:
    """Master + 2 workers, 40 users: the status counts sent by both workers add up to the
    master's request count."""
    result = parse_locust(
        (LOCUST / "distributed_stats.csv").read_text(),
        (LOCUST / "distributed_status.json").read_text(),
        10,
    )
    assert result.requests == 56 and result.by_status == {200: 56}


def test_no_response_counts_as_a_connection_error() -> None:
    """Status 0 (nothing came back) is a connect error, not a response; 502 is non-2xx."""
    stats = (LOCUST / "local_stats.csv").read_text()
    result = parse_locust(stats, '{"200": 100, "0": 4, "502": 2}', 10)
    assert result.requests == 100 and result.errors["connect"] == 4
    assert result.errors["non_2xx"] == 2 and result.by_status == {200: 100, 502: 2}


@pytest.mark.parametrize("text", ["", "not,a,locust\n1,2,3\n", "Type,Name,Request Count\n"])
def test_not_locust_output_is_refused(text: str) -> None:
    """Anything but Locust's stats CSV with an Aggregated row is a ParseError."""
    with pytest.raises(ParseError):
        parse_locust(text, None, 10)
