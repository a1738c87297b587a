"""Parsing shared by the load tools and the proxy: pure functions, re-runnable offline.

Input: raw text (nginx's access log; durations as load tools print them). Output: numbers,
or ParseError. Each load tool's own output is parsed in its module under bench/load/.
"""

from __future__ import annotations

_UNITS_MS = {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60_000.0}


class ParseError(ValueError):
    """The text is not what the parser expects."""


def to_ms(value: str, unit: str) -> float:
    """A duration as load tools print it (`812.00us`, `1.23ms`, `2.01s`, `1.00m`) in ms."""
    return round(float(value) * _UNITS_MS[unit], 6)


def parse_proxy_log(
    text: str, since: float | None = None, until: float | None = None
) -> dict[int, int]:
    """Responses by status from nginx's access log lines (proxy/site.conf.template's `bench`
    format: `$msec $status $upstream_status $request_time "$request"`). Only failed requests
    are logged there, so this is {502: n, 504: m, ...}; malformed lines are ignored.

    With since/until (Unix times), only requests that ended inside the window count: when the
    load tool stops, nginx still answers the requests it was holding (a 504 a second later),
    to clients that are gone and that the load tool never counted."""
    counts: dict[int, int] = {}
    for line in text.splitlines():
        fields = line.split(maxsplit=2)
        try:
            ended = float(fields[0]) if fields else None
        except ValueError:
            continue
        if ended is not None and (
            (since is not None and ended < since) or (until is not None and ended > until)
        ):
            continue
        if len(fields) >= 2 and fields[1].isdigit():
            status = int(fields[1])
            counts[status] = counts.get(status, 0) + 1
    return dict(sorted(counts.items()))
