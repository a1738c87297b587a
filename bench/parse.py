"""Parsing: raw load-tool output -> numbers. Pure functions, re-runnable offline on raw files.

Input: wrk's text (with the WRK_JSON line bench/wrk_report.lua adds, or wrk's plain report).
Output: WrkResult, or ParseError when the text is not wrk's.
"""

from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import dataclass, field

_UNITS_MS = {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60_000.0}
_SIZE = r"([\d.]+)(us|ms|s|m)"


class ParseError(ValueError):
    """The text is not a wrk report."""


@dataclass(frozen=True)
class WrkResult:
    """One wrk run, in the record's units."""

    requests: int
    duration_s: float
    rps: float
    bytes: int | None
    latency_ms: dict[str, float | None]
    errors: dict[str, int]
    by_status: dict[int, int] = field(default_factory=dict)


def to_ms(value: str, unit: str) -> float:
    """A wrk duration (`812.00us`, `1.23ms`, `2.01s`, `1.00m`) in milliseconds."""
    return round(float(value) * _UNITS_MS[unit], 6)


def _latency_ms(lat: dict) -> dict[str, float | None]:
    # When no response arrived in time wrk's histogram is empty: min is INT64_MIN and every
    # percentile 0. That is "no samples", never "0 ms".
    if lat["min"] < 0 or lat["max"] <= 0:
        return dict.fromkeys(("p50", "p90", "p99", "p999", "max", "mean"))
    return {
        "p50": lat["p50"] / 1000,
        "p90": lat["p90"] / 1000,
        "p99": lat["p99"] / 1000,
        "p999": lat["p999"] / 1000,
        "max": lat["max"] / 1000,
        "mean": round(lat["mean"] / 1000, 6),
    }


def _from_json(data: dict) -> WrkResult:
    lat = data["latency_us"]
    duration_s = data["duration_us"] / 1e6
    errors = data["errors"]
    return WrkResult(
        requests=int(data["requests"]),
        duration_s=duration_s,
        rps=data["requests"] / duration_s if duration_s else 0.0,
        bytes=int(data["bytes"]),
        latency_ms=_latency_ms(lat),
        errors={
            "connect": int(errors["connect"]),
            "read": int(errors["read"]),
            "write": int(errors["write"]),
            "timeout": int(errors["timeout"]),
            "non_2xx": int(errors["status"]),
        },
        by_status={int(k): int(v) for k, v in sorted(data.get("by_status", {}).items())},
    )


def _from_text(text: str) -> WrkResult:
    total = re.search(r"(\d+) requests in " + _SIZE, text)
    if total is None:
        raise ParseError("no 'N requests in T' line: not wrk output")
    requests = int(total.group(1))
    duration_s = to_ms(total.group(2), total.group(3)) / 1000
    percentiles = {
        int(p): to_ms(v, u)
        for p, v, u in re.findall(r"^\s+(50|90|99)%\s+" + _SIZE, text, flags=re.MULTILINE)
    }
    latency = re.search(r"Latency\s+" + _SIZE + r"\s+" + _SIZE + r"\s+" + _SIZE, text)
    sockets = re.search(
        r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text
    )
    non_2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    counts = [int(g) for g in sockets.groups()] if sockets else [0, 0, 0, 0]
    return WrkResult(
        requests=requests,
        duration_s=duration_s,
        rps=requests / duration_s if duration_s else 0.0,
        # wrk's text rounds the volume to two decimals of KB/MB/GB: not a byte count.
        bytes=None,
        latency_ms={
            "p50": percentiles.get(50),
            "p90": percentiles.get(90),
            "p99": percentiles.get(99),
            "p999": None,  # wrk's text report stops at p99
            "max": to_ms(latency.group(5), latency.group(6)) if latency else None,
            "mean": to_ms(latency.group(1), latency.group(2)) if latency else None,
        },
        errors=dict(
            zip(("connect", "read", "write", "timeout"), counts, strict=True),
            non_2xx=int(non_2xx.group(1)) if non_2xx else 0,
        ),
    )


def parse_wrk(text: str) -> WrkResult:
    """Numbers of one wrk run: from the WRK_JSON line when present, else from wrk's text."""
    for line in reversed(text.splitlines()):
        if line.startswith("WRK_JSON "):
            try:
                return _from_json(json.loads(line[len("WRK_JSON ") :]))
            except (ValueError, KeyError, TypeError) as exc:
                raise ParseError(f"malformed WRK_JSON line: {exc}") from exc
    return _from_text(text)


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


# Locust's CSV percentiles are integers in ms and coarse: it keeps response times in buckets
# (locust.stats.bucket_response_time): to the ms below 100 ms, to 10 ms below 1 s, to 100 ms
# below 10 s, to 1 s above; the CSV prints each percentile as its bucket. So a 3,004 ms call
# is "3000", and with few samples a high percentile is the slowest bucket itself. Average and
# Max Response Time are exact floats: max comes from the latter, not from the "100%" bucket.
_PERCENTILES = {"p50": "50%", "p90": "90%", "p99": "99%", "p999": "99.9%"}


def _rows(stats_csv: str) -> list[dict[str, str]]:
    try:
        rows = list(csv.DictReader(io.StringIO(stats_csv)))
    except csv.Error as exc:
        raise ParseError(f"locust_stats.csv: {exc}") from exc
    if not rows or "Request Count" not in rows[0] or "Name" not in rows[0]:
        raise ParseError("not Locust's stats CSV (no Name / Request Count columns)")
    return rows


def _number(value: str | None) -> float | None:
    try:
        return float(value) if value not in (None, "", "N/A") else None
    except ValueError:
        return None


def _count(row: dict[str, str], column: str) -> int:
    try:
        return int(row[column])
    except (KeyError, TypeError, ValueError) as exc:
        raise ParseError(f"locust_stats.csv: bad {column!r} in row {row.get('Name')!r}") from exc


def parse_locust(stats_csv: str, status_json: str | None, duration_s: float) -> WrkResult:
    """Locust's Aggregated row and our status counts -> the WrkResult a wrk run gives.

    Mapping (documented in the record): requests = Locust's Request Count (failed ones
    included) minus status 0, i.e. every HTTP response, as wrk counts them; rps = requests /
    duration_s (the -t window; each user's last request may end in the stop timeout);
    errors.connect = status 0, every request that got no response (Locust does not tell a
    refused connection from a reset or a timeout, so read/write/timeout stay 0);
    errors.non_2xx = responses outside 2xx; by_status = the counts, status 0 left out.
    A 200 whose body check failed is a Locust failure but no wrk error: see the task figures.
    Latency is Locust's over all its requests: when some got no response, their time to fail
    is in it (the CSV cannot separate them); when none got a response, latency is None.
    """
    rows = _rows(stats_csv)
    total = next((row for row in rows if row["Name"] == "Aggregated"), None)
    if total is None:
        raise ParseError("locust_stats.csv has no Aggregated row")
    by_status: dict[int, int] = {}
    if status_json:
        try:
            by_status = {int(k): int(v) for k, v in json.loads(status_json).items()}
        except (ValueError, AttributeError, TypeError) as exc:
            raise ParseError(f"status.json: {exc}") from exc
    no_response = by_status.pop(0, 0)
    requests = max(0, _count(total, "Request Count") - no_response)
    latency = {key: _number(total.get(column)) for key, column in _PERCENTILES.items()}
    latency["max"] = _number(total.get("Max Response Time"))
    latency["mean"] = _number(total.get("Average Response Time"))
    if requests == 0:
        latency = dict.fromkeys(latency)  # no samples, never "0 ms"
    return WrkResult(
        requests=requests,
        duration_s=duration_s,
        rps=requests / duration_s if duration_s else 0.0,
        bytes=None,
        latency_ms=latency,
        errors={
            "connect": no_response,
            "read": 0,
            "write": 0,
            "timeout": 0,
            "non_2xx": sum(v for k, v in by_status.items() if not 200 <= k < 300),
        },
        by_status=dict(sorted(by_status.items())),
    )


def parse_locust_tasks(stats_csv: str) -> dict[str, dict[str, float | int | None]]:
    """Per task (Locust's request name): requests, failures, p50/p99/mean ms, req/s."""
    return {
        row["Name"]: {
            "requests": _count(row, "Request Count"),
            "failures": _count(row, "Failure Count"),
            "p50_ms": _number(row.get("50%")),
            "p99_ms": _number(row.get("99%")),
            "mean_ms": _number(row.get("Average Response Time")),
            "rps": _number(row.get("Requests/s")),
        }
        for row in _rows(stats_csv)
        if row["Name"] != "Aggregated"
    }
