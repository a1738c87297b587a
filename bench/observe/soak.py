"""Soak runs (make soak): memory of every server process over a long window at a fixed rate.

Input: the server's leader PID and a sampling interval; after the run, oha's per-request
file. Output: the record's `series` {interval_s, t_s, rss_mb (pid -> one value per sample,
null where the process did not exist), rss_total_mb, rss_slope_mb_per_h {slope, ci_low,
ci_high, r} (scipy.stats.linregress of the total over time, 95 % interval from its standard
error and Student's t), minutes {minute, responses_per_s, non_2xx}}; the summary's soak
section and RSS-over-time plot per server.

Samples are taken at k × interval (k = 0, 1, ...) from the start of the load, while it
runs: a window of D seconds has floor(D / interval) of them (the last one before the end),
one value per process each time; a worker that was replaced leaves nulls from then on and
its successor starts with them.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import psutil

from bench.host.procs import process_tree
from bench.observe.lifecycle import parse_requests

MB = 1024 * 1024


def samples_in(duration_s: float, interval_s: float) -> int:
    """The samples a window holds: at 0, interval, ... strictly before its end."""
    return max(1, int((duration_s - 1e-9) // interval_s) + 1)


@dataclass
class RssSampler:
    """RSS of every process of the server's tree at k × interval_s, on its own thread."""

    pid: int
    interval_s: float
    count: int  # samples to take (samples_in(duration, interval))
    times: list[float] = field(default_factory=list)
    rss: list[dict[int, float]] = field(default_factory=list)
    _started: float = 0.0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        """Start sampling now (the load starts now)."""
        self._started = time.monotonic()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        for k in range(self.count):
            due = self._started + k * self.interval_s
            if self._stop.wait(max(0.0, due - time.monotonic())):
                return
            self.times.append(round(time.monotonic() - self._started, 3))
            self.rss.append(_tree_rss_mb(self.pid))

    def stop(self) -> None:
        """Stop (the load ended) and wait for the thread."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


def _tree_rss_mb(pid: int) -> dict[int, float]:
    rss = {}
    for member in sorted(process_tree(pid)):
        try:
            rss[member] = round(psutil.Process(member).memory_info().rss / MB, 3)
        except psutil.Error:
            continue
    return rss


def rss_series(times: list[float], rss: list[dict[int, float]], leader: int) -> dict[str, object]:
    """Per-process columns (null where absent; `leader` is the process the harness started,
    the others its workers), the total per sample, and its slope."""
    pids = sorted({pid for sample in rss for pid in sample})
    columns = {str(pid): [sample.get(pid) for sample in rss] for pid in pids}
    totals = [round(sum(sample.values()), 3) for sample in rss]
    return {
        "leader_pid": str(leader),
        "t_s": times,
        "rss_mb": columns,
        "rss_total_mb": totals,
        "rss_slope_mb_per_h": slope_mb_per_h(times, totals),
    }


def slope_mb_per_h(times: list[float], values: list[float]) -> dict[str, float] | None:
    """Least-squares slope of MB over time, per hour, with a 95 % confidence interval
    (scipy.stats.linregress's standard error × Student's t with n − 2 degrees of freedom);
    None with fewer than 3 samples."""
    if len(times) < 3 or len(set(times)) < 2:
        return None
    from scipy import stats

    fit = stats.linregress(times, values)
    half = float(stats.t.ppf(0.975, len(times) - 2)) * float(fit.stderr)
    slope = float(fit.slope)
    return {
        "slope": round(slope * 3600, 3),
        "ci_low": round((slope - half) * 3600, 3),
        "ci_high": round((slope + half) * 3600, 3),
        "r": round(float(fit.rvalue), 4) if fit.rvalue == fit.rvalue else 0.0,
    }


def per_minute(requests: str | bytes, duration_s: float) -> list[dict[str, float]]:
    """Responses per second and non-2xx responses in each minute of intended send time
    (oha's per-request file holds responses only: socket errors have no time and are in
    the record's totals)."""
    rows = parse_requests(requests)
    minutes = max(1, int(-(-duration_s // 60)))
    counts = [0] * minutes
    bad = [0] * minutes
    for intended, _latency, status in rows:
        index = min(int(intended // 60), minutes - 1)
        counts[index] += 1
        if not 200 <= status < 300:
            bad[index] += 1
    out = []
    for index in range(minutes):
        span = min(60.0, duration_s - 60 * index)
        out.append(
            {
                "minute": index + 1,
                "responses_per_s": round(counts[index] / span, 3) if span > 0 else 0.0,
                "non_2xx": bad[index],
            }
        )
    return out
