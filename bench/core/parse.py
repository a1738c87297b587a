"""Parsing shared by the load tools and the proxy: pure functions, re-runnable offline.

Input: raw text (nginx's access log). Output: numbers, or ParseError (the one error type of
every parser). Each load tool's own output is parsed in its module under bench/load/.
"""

from __future__ import annotations

import math
import re


class ParseError(ValueError):
    """The text is not what the parser expects."""


def _log_ms(value: str) -> int:
    """nginx's `$msec` or `$request_time` (`1795437158.651`, `2.001`) in whole milliseconds."""
    whole, _, frac = value.partition(".")
    if not whole.isdigit() or not (frac.isdigit() or frac == "") or len(frac) > 3:
        raise ValueError(value)
    return int(whole) * 1000 + int(frac.ljust(3, "0"))


def parse_proxy_log(
    text: str, since: float | None = None, until: float | None = None
) -> dict[int, int]:
    """Responses by status from nginx's access log lines (proxy/site.conf.template's `bench`
    format: `$msec $status $upstream_status $request_time "$request"`). Only failed requests
    are logged there, so this is {502: n, 504: m, ...}; malformed lines are ignored.

    With since/until (Unix seconds), only the requests that STARTED at or after `since` and
    ENDED at or before `until` count. `$msec` is when nginx wrote the line (the request's
    end), `$msec - $request_time` when it began; both come from nginx's cached clock, to the
    ms, never later than the real instant. So with the load tool's own window (wrk_report.lua:
    before its first request .. its last counted response), every response it counted is
    inside, requests left over from an earlier load (primer, warmup) are not, nor are those
    nginx answers after the load tool stopped reading (504s seconds later, 499s when its
    connections close)."""
    since_ms = None if since is None else math.floor(since * 1000)
    until_ms = None if until is None else math.floor(until * 1000)
    counts: dict[int, int] = {}
    for line in text.splitlines():
        fields = line.split(maxsplit=4)
        if len(fields) < 2 or not fields[1].isdigit():
            continue
        try:
            ended = _log_ms(fields[0])
            started = ended - _log_ms(fields[3]) if since_ms is not None else ended
        except (IndexError, ValueError):
            continue
        if (since_ms is not None and started < since_ms) or (
            until_ms is not None and ended > until_ms
        ):
            continue
        status = int(fields[1])
        counts[status] = counts.get(status, 0) + 1
    return dict(sorted(counts.items()))


# nginx's error-log line: `2026/11/23 15:38:23 [crit] 11744#11744: *10 <what happened>, client:`
_ERROR_LINE = re.compile(r"^\S+ \S+ \[(\w+)\] \d+#\d+: (?:\*\d+ )?(.*?)(?:, client: .*)?$")


def parse_proxy_errors(text: str) -> dict[str, int]:
    """nginx's error-log reasons and how often each appeared: the text between the connection
    number and `, client:` ("connect() to 127.0.0.1:8000 failed (99: Cannot assign requested
    address) while connecting to upstream", "upstream prematurely closed connection while
    reading response header from upstream"); lines below [error] (notices, warnings about
    buffering) are not failures and are left out."""
    counts: dict[str, int] = {}
    for line in text.splitlines():
        match = _ERROR_LINE.match(line.strip())
        if match is None or match.group(1) not in ("error", "crit", "alert", "emerg"):
            continue
        counts[match.group(2)] = counts.get(match.group(2), 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
