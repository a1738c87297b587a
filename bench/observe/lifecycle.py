"""Lifecycle events under load (LIFECYCLE=reload): the server's own graceful reload sent at a
planned second of the measured window, and what the load saw around it.

Input: the planned second and a function that sends the server's reload signal (its
[reload] declaration); after the run, oha's per-request file (each response's intended send
time, latency from it and status: bench.load.oha.requests_csv) and the run's error counts.
Output: the record's `lifecycle` {event, signal, planned_at_s, at_s, failed, failed_by_class,
p99_before_ms, p99_around_ms, p99_after_ms, latency_limit_ms, late_arrivals, arrivals,
recovery_s, disrupted_s, ...}; late() also for RECYCLE= runs (the record's `recycles`).

Definitions (all on oha's timeline, in seconds from its first arrival; the trigger's clock
starts when the load tool is started, a few ms earlier):
- failed: every request that did not get a 2xx answer, by class as the load tool reports
  them (connect, read, write, timeout, other, non_2xx) plus arrivals never sent (unsent). The
  tool's own cut-off at its deadline (aborted) is not the server's doing and not counted.
- late_arrivals: arrivals answered 2xx, but later than latency_limit_ms (LATE_LIMIT_MS in
  bench/core/defaults.py: one fixed limit for every server) from their intended send time:
  "0 failed" says nothing of the arrivals a stall answered seconds late. arrivals: those due
  in the window (rate x its length).
- p99 around the reload: of the responses whose intended send time lies within AROUND_S
  seconds either side of the signal; before/after: the rest of the window on each side.
- recovery_s: from the signal until the start of the first BIN_S bin from which every bin to
  the end of the window is healthy: at least HEALTHY_SHARE of the arrivals due in the bin
  answered 2xx within the latency limit (the same fixed LATE_LIMIT_MS; until record format
  16 it was 3 × the server's own p99 before the reload, at least +100 ms: a noisy baseline
  moved it). 0 when the reload disturbed nothing; None when the rate was not served again
  in the window.
"""

from __future__ import annotations

import gzip
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from bench.core.defaults import LATE_LIMIT_MS
from bench.core.outcome import Outcome
from bench.core.variables import LIFECYCLES

EVENTS = LIFECYCLES  # declared with LIFECYCLE= (bench/core/variables.py)
AROUND_S = 2.0
BIN_S = 0.5
HEALTHY_SHARE = 0.99
# The last second of a window holds requests cut off by the tool's deadline: not judged.
TAIL_S = 1.0


@dataclass
class Trigger:
    """Calls `fire` once, `planned_at_s` seconds after start(), on a timer thread."""

    planned_at_s: float
    fire: Callable[[], None]
    fired_at_s: float | None = None
    error: str | None = None
    _started: float = 0.0
    _timer: threading.Timer | None = field(default=None, repr=False)

    def start(self) -> None:
        """Start the clock (just before the load tool starts)."""
        self._started = time.monotonic()
        self._timer = threading.Timer(self.planned_at_s, self._run)
        self._timer.daemon = True
        self._timer.start()

    def _run(self) -> None:
        self.fired_at_s = round(time.monotonic() - self._started, 3)
        try:
            self.fire()
        except OSError as exc:
            self.error = f"the reload signal could not be sent: {exc.strerror or exc}"

    def stop(self) -> None:
        """Cancel it if it has not fired (the run ended early); wait for it if it is firing."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer.join()


def parse_requests(text: str | bytes) -> list[tuple[float, float, int]]:
    """oha.requests.csv (gzip or not) -> (intended_s, latency_ms, status) per response."""
    if isinstance(text, bytes):
        text = (gzip.decompress(text) if text[:2] == b"\x1f\x8b" else text).decode()
    rows = []
    for line in text.splitlines()[1:]:
        if line:
            intended, latency, status = line.split(",")
            rows.append((float(intended) / 1000, float(latency), int(status)))
    return rows


def p99(latencies: list[float]) -> float | None:
    """oha's percentile (sorted[floor(0.99 n)]): the same as the record's."""
    values = sorted(latencies)
    return values[min(int(0.99 * len(values)), len(values) - 1)] if values else None


def failed_by_class(errors: dict[str, object]) -> dict[str, int]:
    """The record's errors -> the classes a reload can cause, non-zero ones only."""
    return Outcome.of(0, errors).by_class()


def due(rate: float, start_s: float, end_s: float) -> int:
    """Arrivals an open-loop tool schedules in [start_s, end_s): at i / rate, i = 0, 1, ..."""
    return max(0, math.ceil(end_s * rate) - math.ceil(start_s * rate))


def recovery(
    rows: list[tuple[float, float, int]],
    rate: float,
    duration_s: float,
    at_s: float,
    limit_ms: float,
) -> tuple[float | None, float]:
    """(recovery_s, disrupted_s): see the module's definition; disrupted_s is the time, in
    unhealthy bins after the signal, the rate was not served."""
    last = int((duration_s - TAIL_S) / BIN_S)  # bins 0 .. last-1 are judged
    first = max(0, int(at_s / BIN_S))
    good = [0] * max(last, 0)
    for intended, latency, status in rows:
        index = int(intended / BIN_S)
        if 0 <= index < last and 200 <= status < 300 and latency <= limit_ms:
            good[index] += 1
    healthy = [
        good[b] >= HEALTHY_SHARE * due(rate, b * BIN_S, (b + 1) * BIN_S) for b in range(last)
    ]
    disrupted = sum(1 for b in range(first, last) if not healthy[b]) * BIN_S
    for start in range(first, last):
        if all(healthy[start:last]):
            return round(max(0.0, start * BIN_S - at_s), 3), disrupted
    return None, disrupted


def analyse(
    requests: str | bytes,
    errors: dict[str, object],
    rate: float,
    duration_s: float,
    at_s: float,
) -> dict[str, object]:
    """What the load saw around a signal at `at_s`: the lifecycle fields of the record."""
    rows = parse_requests(requests)
    before = [lat for t, lat, _ in rows if t < at_s - AROUND_S]
    around = [lat for t, lat, _ in rows if at_s - AROUND_S <= t < at_s + AROUND_S]
    after = [lat for t, lat, _ in rows if t >= at_s + AROUND_S]
    recovery_s, disrupted_s = recovery(rows, rate, duration_s, at_s, LATE_LIMIT_MS)
    by_class = failed_by_class(errors)
    return {
        "failed": sum(by_class.values()),
        "failed_by_class": by_class,
        "p99_before_ms": p99(before),
        "p99_around_ms": p99(around),
        "p99_after_ms": p99(after),
        "recovery_s": recovery_s,
        "disrupted_s": disrupted_s,
    } | late(rows, rate, duration_s)


def late(rows: list[tuple[float, float, int]], rate: float, duration_s: float) -> dict[str, object]:
    """The window's late arrivals (answered 2xx past LATE_LIMIT_MS), the limit and the
    arrivals due: the fields a reload's and a recycling run's record carry."""
    count = sum(1 for _, latency, status in rows if 200 <= status < 300 and latency > LATE_LIMIT_MS)
    return {
        "late_arrivals": count,
        "latency_limit_ms": LATE_LIMIT_MS,
        "arrivals": due(rate, 0, duration_s),
    }
