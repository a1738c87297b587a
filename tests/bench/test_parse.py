"""wrk output -> numbers, over real wrk output captured on this project's machine."""

import dataclasses
from pathlib import Path

import pytest

from bench.core.parse import ParseError
from bench.load import Errors
from bench.load.wrk import parse_wrk, to_ms

WRK = Path(__file__).resolve().parent.parent / "fixtures" / "wrk"


def test_normal_run_reads_the_json_line() -> None:
    """A clean run: requests, rps from the exact duration, percentiles in ms incl. p99.9."""
    result = parse_wrk((WRK / "ok.txt").read_text())
    assert result.requests == 409_800
    assert result.rps == pytest.approx(409_800 / 3.100743)
    assert result.latency.p50 == pytest.approx(0.071)
    assert result.latency.p999 == pytest.approx(1.904)
    assert result.latency.max == pytest.approx(2.970)
    assert result.errors == Errors(by_status=result.errors.by_status)
    assert result.errors.by_status == {200: 409_800}


def test_non_2xx_responses_are_counted_by_status() -> None:
    """nginx answering 502: every response is non-2xx and counted under 502."""
    result = parse_wrk((WRK / "non2xx.txt").read_text())
    assert result.errors.non_2xx == result.requests == 280_039
    assert result.errors.by_status == {502: 280_039}


def test_timeouts_leave_no_latency_samples() -> None:
    """All requests slower than --timeout: 40 timeouts, and latency None, never 0 ms."""
    result = parse_wrk((WRK / "timeouts.txt").read_text())
    assert result.errors.timeout == 40
    assert all(value is None for value in result.latency.to_dict().values())


def test_text_only_report_is_parsed_without_p999() -> None:
    """Without the Lua script's line, wrk's text still gives rps and p50/p90/p99."""
    result = parse_wrk((WRK / "text_only.txt").read_text())
    assert result.requests == 444_120
    assert result.latency.p99 == pytest.approx(0.238)
    assert result.latency.p999 is None
    assert result.errors.timeout == 0


def test_socket_errors_line_in_text() -> None:
    """The text fallback reads the socket-error and non-2xx lines."""
    text = (WRK / "timeouts.txt").read_text().split("WRK_JSON")[0]
    text += "  Non-2xx or 3xx responses: 7\n"
    result = parse_wrk(text)
    assert result.errors.timeout == 40 and result.errors.non_2xx == 7


def test_units() -> None:
    """wrk's us/ms/s/m suffixes become milliseconds."""
    assert to_ms("812.00", "us") == pytest.approx(0.812)
    assert to_ms("2.01", "s") == pytest.approx(2010)
    assert to_ms("1.00", "m") == pytest.approx(60_000)


def test_not_wrk_output_is_refused() -> None:
    """Anything else raises ParseError instead of producing numbers."""
    with pytest.raises(ParseError):
        parse_wrk("unable to connect to 127.0.0.1:1 Connection refused\n")
    with pytest.raises(ParseError):
        parse_wrk('WRK_JSON {"requests": \n')


def test_nginx_log_counts_failures_inside_the_load_window() -> None:
    """A real overflow behind nginx (gunicorn-sync, 1 worker, backlog 4, c=200, 2 s proxy
    timeouts): 387 504s logged, but 192 of them a second after wrk stopped, for clients that
    had gone; inside wrk's window the count (195) equals wrk's own."""
    from bench.core.parse import parse_proxy_log

    text = (WRK.parent / "nginx" / "overflow-access.log").read_text()
    assert parse_proxy_log(text) == {499: 15, 504: 387}
    assert parse_proxy_log(text, 1795405500.5, 1795405505.9)[504] == 195
    assert parse_proxy_log("garbage\n\n1.0 abc\n") == {}


def test_nginx_log_inside_wrks_own_window_matches_what_wrk_counted() -> None:
    """The same overflow on a busy machine (2 CPU hogs), wrk's report with its window (its
    clock: before the first request .. its last counted response). 504s come in bursts, 2 s
    and 3 s after each request starts, so one burst lands where wrk stops: here 51 of them
    5.044 s after wrk's start, which wrk counted, and 96 at 5.052 s, after its last response
    (5.047 s). Requests that started and ended inside wrk's window are exactly the 242 504s
    wrk saw; the primer's leftovers and the 499s of wrk's exit are outside. A window of wrk's
    duration from any other start (the harness's clock before wrk's start-up) is off by a burst."""
    from bench.core.parse import parse_proxy_log

    log = (WRK.parent / "nginx" / "backlog-access.log").read_text()
    wrk = parse_wrk((WRK.parent / "nginx" / "backlog.wrk.txt").read_text())
    assert wrk.window == (1795437569.034029, 1795437574.081051)
    assert wrk.errors.by_status == {200: 46, 504: 242}
    assert parse_proxy_log(log) == {499: 110, 504: 339}
    assert parse_proxy_log(log, *wrk.window) == {504: 242}
    start = wrk.window[0]
    assert parse_proxy_log(log, start, start + wrk.duration_s) == {504: 338}
    assert parse_proxy_log(log, start - 0.05, start - 0.05 + wrk.duration_s) == {504: 191}


def test_nginx_log_times_are_read_to_the_millisecond() -> None:
    """A request counts when it started at or after `since` and ended at or before `until`,
    both compared in nginx's whole milliseconds; a line without a readable time is skipped."""
    from bench.core.parse import parse_proxy_log

    log = (
        '100.000 504 504 2.000 "GET / HTTP/1.1"\n'  # started 98.000
        '100.500 502 502 0.499 "GET / HTTP/1.1"\n'  # started 100.001
        '101.000 504 504 3 "GET / HTTP/1.1"\n'  # started 98.000
        "101.0001 504 504 1.000 x\n"  # more than ms: not nginx's $msec
        '101.002 499 - 0.001 "GET / HTTP/1.1"\n'
    )
    assert parse_proxy_log(log) == {499: 1, 502: 1, 504: 2}
    assert parse_proxy_log(log, 98.0, 101.0) == {502: 1, 504: 2}
    assert parse_proxy_log(log, 98.0009, 100.9999) == {502: 1, 504: 1}
    assert parse_proxy_log(log, 100.0025, 101.0029) == {499: 1}
    assert parse_proxy_log(log, 100.0005) == {499: 1, 502: 1}


def test_wrk_without_a_window_reports_none() -> None:
    """Older raw files (and a wrk without LuaJIT's ffi) have no window_us: None, not a guess."""
    assert parse_wrk((WRK / "ok.txt").read_text()).window is None


def test_a_run_without_status_counting_has_no_by_status_but_its_non_2xx() -> None:
    """gunicorn-sync measured without `-- statuses` (no response() in wrk's Lua): requests,
    percentiles and wrk's own non-2xx count as always; by_status empty, no window."""
    result = parse_wrk((WRK / "no_statuses.txt").read_text())
    assert result.requests == 5_527
    assert result.latency.p999 is not None
    assert result.errors == Errors()
    assert result.errors.by_status == {} and result.window is None


def test_wrk_is_asked_to_count_statuses_only_when_the_request_says_so() -> None:
    """The script's argument `statuses` follows the URL after `--`, or is absent."""
    from bench.load import LoadRequest
    from bench.load.wrk import wrk_argv

    request = LoadRequest("http://127.0.0.1:8000", "/db", "db", 50, 5, Path("x"))
    assert wrk_argv(request, 1)[-3:] == ["http://127.0.0.1:8000/db", "--", "statuses"]
    quiet = wrk_argv(dataclasses.replace(request, statuses=False), 1)
    assert quiet[-1] == "http://127.0.0.1:8000/db" and "--" not in quiet
