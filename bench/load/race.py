"""The keep-alive race's arrival pattern: bursts of concurrent requests separated by idle gaps
set around the server's keep-alive timeout.

Input: a Namespace, the front's URL, the idle gaps (ms), the burst size and the rounds per
gap. Output: a RaceResult: statuses and client errors per gap, and in all. `Race` declares
what a record whose load_tool is "race" stands for (bench.load.traits); only the
load-balancer study drives the pattern, LOAD= cannot name it.

Why bursts: a burst of N concurrent requests makes the balancer open (or re-use) N upstream
connections; after the burst they sit idle in its keep-alive pool. The next burst is sent
when the gap has passed since the previous burst's last answer: every one of its requests
goes out on an upstream connection idle for about the gap. With the gap near the server's
keep-alive timeout, the server closes connections just as requests arrive on them: the race,
N chances per burst. Within a burst the N requests leave at once, whatever the server does;
the gap, though, starts at the previous burst's last answer (that is the idle time the
connections see), so this is open loop within a burst and closed between bursts. oha has no
idle-gap pattern (its --burst-delay is ignored under -q), so the bursts are sent here, each
request on a new client connection to the front (the client side is not what races).
"""

from __future__ import annotations

import http.client
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import ClassVar
from urllib.parse import urlsplit

from bench.core import scenario
from bench.host.netns import Namespace

REQUEST_TIMEOUT_S = 10.0


class Race:
    """The burst pattern as a record's load_tool: its traits, no LoadRequest run."""

    name: ClassVar[str] = "race"
    # Open within a burst, closed between bursts (module docstring): not a fixed arrival rate.
    open_loop: ClassVar[bool] = False
    busy: ClassVar[bool] = False  # bursts separated by idle gaps
    drives: ClassVar[str] = scenario.URL
    per_request: ClassVar[str | None] = None
    selectable: ClassVar[bool] = False  # the load-balancer study's own pattern
    default: ClassVar[bool] = False
    variables: ClassVar[tuple[str, ...]] = ()
    protocols: ClassVar[tuple[str, ...]] = ("http1",)  # PROTOCOL= values it speaks
    caveat: ClassVar[str] = ""
    raw_name: ClassVar[str] = "race.json"  # the whole RaceResult, beside the record


@dataclass
class RaceResult:
    """Statuses and client-side errors, per idle gap and in all."""

    gaps_ms: list[int]
    burst: int
    rounds: int
    by_gap: dict[int, dict[str, int]] = field(default_factory=dict)
    by_status: Counter = field(default_factory=Counter)
    errors: dict[str, int] = field(default_factory=dict)
    duration_s: float = 0.0

    @property
    def requests(self) -> int:
        """Requests answered with any status."""
        return sum(self.by_status.values())

    def summary(self) -> dict[str, object]:
        """The record's view: the pattern and the 502s per gap."""
        return {
            "gaps_ms": self.gaps_ms,
            "burst": self.burst,
            "rounds": self.rounds,
            "sent": self.requests + sum(self.errors.values()),
            "by_gap": {str(g): v for g, v in self.by_gap.items()},
        }

    def to_dict(self) -> dict[str, object]:
        """Everything, for the raw file beside the record."""
        return {
            **self.summary(),
            "by_status": {str(k): v for k, v in sorted(self.by_status.items())},
            "errors": self.errors,
            "duration_s": self.duration_s,
        }


def _get(host: str, port: int, path: str) -> str:
    conn = http.client.HTTPConnection(host, port, timeout=REQUEST_TIMEOUT_S)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        resp.read()
        return str(resp.status)
    except (OSError, http.client.HTTPException) as exc:
        return f"error: {exc.__class__.__name__}: {exc}"
    finally:
        conn.close()


def _bursts(url: str, gaps_ms: list[int], burst: int, rounds: int) -> RaceResult:
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    path = parts.path + (f"?{parts.query}" if parts.query else "")
    result = RaceResult(list(gaps_ms), burst, rounds)
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=burst) as pool:
        # One burst first, not counted: it opens the upstream connections the gaps age.
        list(pool.map(lambda _: _get(host, port, path), range(burst)))
        for gap in gaps_ms:
            seen: Counter = Counter()
            for _ in range(rounds):
                time.sleep(gap / 1000)
                outcomes = list(pool.map(lambda _: _get(host, port, path), range(burst)))
                seen.update(outcomes)
            result.by_gap[gap] = dict(sorted(seen.items()))
            for outcome, n in seen.items():
                if outcome.isdigit():
                    result.by_status[int(outcome)] += n
                else:
                    result.errors[outcome] = result.errors.get(outcome, 0) + n
    result.duration_s = time.monotonic() - started
    return result


def run_race(ns: Namespace, url: str, gaps_ms: list[int], burst: int, rounds: int) -> RaceResult:
    """The bursts, sent from inside the namespace (threads inherit the namespace of the
    thread that starts them)."""
    return ns.call(lambda: _bursts(url, gaps_ms, burst, rounds))


def idle_close_s(host: str, port: int, path: str, limit_s: float) -> float | None:
    """How long the server keeps an idle keep-alive connection open: one HTTP/1.1 request,
    its answer read, then the seconds until the server closes the connection (0.0 when it
    closes right after answering: no keep-alive); None when it is still open at limit_s."""
    conn = http.client.HTTPConnection(host, port, timeout=REQUEST_TIMEOUT_S)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        resp.read()
        answered = time.monotonic()
        if resp.will_close or conn.sock is None:
            return 0.0
        conn.sock.settimeout(limit_s)
        try:
            data = conn.sock.recv(1)
        except TimeoutError:
            return None
        except ConnectionResetError:
            data = b""
        if data:
            raise OSError(f"{host}:{port} sent {data!r} on an idle connection")
        return round(time.monotonic() - answered, 3)
    finally:
        conn.close()


def probe_idle_close(ns: Namespace, port: int, path: str, limit_s: float) -> float | None:
    """idle_close_s against the server itself (no front), from inside the namespace."""
    return ns.call(lambda: idle_close_s("127.0.0.1", port, path, limit_s))


def gaps_around(close_s: float, offsets_ms: list[int]) -> list[int]:
    """Idle gaps (ms, positive, distinct, ascending) at offsets from a measured close time."""
    base = round(close_s * 1000)
    return sorted({base + offset for offset in offsets_ms if base + offset > 0})


def within_budget(
    gaps_ms: list[int], rounds: int, budget_s: float, close_ms: int | None = None
) -> tuple[list[int], int]:
    """Gaps and rounds cut to about budget_s of idle time (a server that closes after 30 s
    would otherwise take 11 gaps x 4 rounds x 30 s): fewer rounds first, then (at one round)
    only the gaps nearest the measured close, where the race can happen."""
    if not gaps_ms or rounds < 1:
        return gaps_ms, rounds
    bursts = max(1, int(budget_s * 1000 // max(1, sum(gaps_ms) / len(gaps_ms))))
    if len(gaps_ms) * rounds <= bursts:
        return gaps_ms, rounds
    if bursts >= len(gaps_ms):
        return gaps_ms, bursts // len(gaps_ms)
    centre = close_ms if close_ms is not None else gaps_ms[len(gaps_ms) // 2]
    nearest = sorted(gaps_ms, key=lambda g: (abs(g - centre), g))[:bursts]
    return sorted(nearest), 1


TOOL = Race
