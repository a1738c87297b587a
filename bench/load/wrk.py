"""wrk: closed-loop load at a fixed number of connections against one URL.

Input: a LoadRequest. Output: a LoadResult parsed from wrk's text and the JSON line our Lua
script (bench/load/wrk_report.lua) adds; the text is kept beside the record (`wrk.txt`) and
parse_wrk re-reads it offline. wrk's percentiles include its own post-hoc estimate of the
samples a stalled server kept it from sending (`stats_correct` in its stats.c).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from bench.core import scenario
from bench.core.parse import ParseError
from bench.load import (
    DEFAULT_TIMEOUT_S,
    OVERSTAY_S,
    Errors,
    Latency,
    LoadError,
    LoadRequest,
    LoadResult,
    Watch,
    run_bounded,
)

if TYPE_CHECKING:
    from bench.host.procs import ProcessTable
    from bench.observe.sample import Sampler

WRK_SCRIPT = Path(__file__).resolve().parent / "wrk_report.lua"
RAW_NAME = "wrk.txt"
_SIZE = r"([\d.]+)(us|ms|s|m)"
_UNITS_MS = {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60_000.0}


def to_ms(value: str, unit: str) -> float:
    """A duration as wrk prints it (`812.00us`, `1.23ms`, `2.01s`, `1.00m`) in ms."""
    return round(float(value) * _UNITS_MS[unit], 6)


def wrk_binary() -> str:
    """Path of wrk."""
    found = shutil.which("wrk")
    if found is None:
        raise LoadError("wrk not found: run `make setup`")
    return found


def wrk_version() -> str | None:
    """wrk's version string, e.g. `debian/4.1.0-3+b2`."""
    result = subprocess.run([wrk_binary(), "-v"], capture_output=True, text=True)
    words = (result.stdout + result.stderr).split()
    return words[1] if len(words) > 1 else None


def _latency(lat: dict) -> Latency:
    # When no response arrived in time wrk's histogram is empty: min is INT64_MIN and every
    # percentile 0. That is "no samples", never "0 ms".
    if lat["min"] < 0 or lat["max"] <= 0:
        return Latency()
    return Latency(
        p50=lat["p50"] / 1000,
        p90=lat["p90"] / 1000,
        p99=lat["p99"] / 1000,
        p999=lat["p999"] / 1000,
        max=lat["max"] / 1000,
        mean=round(lat["mean"] / 1000, 6),
    )


def _from_json(data: dict, text: str) -> LoadResult:
    duration_s = data["duration_us"] / 1e6
    errors = data["errors"]
    return LoadResult(
        requests=int(data["requests"]),
        duration_s=duration_s,
        rps=data["requests"] / duration_s if duration_s else 0.0,
        bytes=int(data["bytes"]),
        latency=_latency(data["latency_us"]),
        errors=Errors(
            connect=int(errors["connect"]),
            read=int(errors["read"]),
            write=int(errors["write"]),
            timeout=int(errors["timeout"]),
            non_2xx=int(errors["status"]),
            by_status={int(k): int(v) for k, v in sorted(data.get("by_status", {}).items())},
        ),
        raw={RAW_NAME: text},
        window=(
            (data["window_us"]["start"] / 1e6, data["window_us"]["end"] / 1e6)
            if "window_us" in data
            else None
        ),
    )


def _from_text(text: str) -> LoadResult:
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
    connect, read, write, timeout = (int(g) for g in sockets.groups()) if sockets else (0,) * 4
    return LoadResult(
        requests=requests,
        duration_s=duration_s,
        rps=requests / duration_s if duration_s else 0.0,
        # wrk's text rounds the volume to two decimals of KB/MB/GB: not a byte count.
        bytes=None,
        latency=Latency(
            p50=percentiles.get(50),
            p90=percentiles.get(90),
            p99=percentiles.get(99),
            p999=None,  # wrk's text report stops at p99
            max=to_ms(latency.group(5), latency.group(6)) if latency else None,
            mean=to_ms(latency.group(1), latency.group(2)) if latency else None,
        ),
        errors=Errors(
            connect=connect,
            read=read,
            write=write,
            timeout=timeout,
            non_2xx=int(non_2xx.group(1)) if non_2xx else 0,
        ),
        raw={RAW_NAME: text},
    )


def parse_wrk(text: str) -> LoadResult:
    """Numbers of one wrk run: from the WRK_JSON line when present, else from wrk's text."""
    for line in reversed(text.splitlines()):
        if line.startswith("WRK_JSON "):
            try:
                return _from_json(json.loads(line[len("WRK_JSON ") :]), text)
            except (ValueError, KeyError, TypeError) as exc:
                raise ParseError(f"malformed WRK_JSON line: {exc}") from exc
    return _from_text(text)


def wrk_argv(request: LoadRequest, threads: int) -> list[str]:
    """wrk's command line for one run."""
    argv = [
        wrk_binary(),
        f"-t{max(1, min(threads, request.concurrency))}",
        f"-c{request.concurrency}",
        f"-d{max(1, round(request.duration_s))}s",
        f"--timeout={request.timeout_s}s",
        "--latency",
        "-s",
        str(WRK_SCRIPT),
    ]
    if not request.keepalive:
        # every request on a new connection, closed after the response
        argv += ["-H", "Connection: close"]
    # wrk_report.lua's own argument: count by status (its response() exists only then)
    return [*argv, request.url, *(["--", "statuses"] if request.statuses else [])]


@dataclass
class Wrk:
    """wrk with `threads` threads (never more than connections)."""

    threads: int = 1
    name: ClassVar[str] = "wrk"
    primes: ClassVar[bool] = True
    open_loop: ClassVar[bool] = False
    busy: ClassVar[bool] = True  # each connection sends again as soon as its answer arrives
    drives: ClassVar[str] = scenario.URL
    per_request: ClassVar[str | None] = None  # wrk keeps a histogram, not each response
    selectable: ClassVar[bool] = True
    # One URL at a time with the lowest client overhead: what LOAD= is when unset.
    default: ClassVar[bool] = True
    variables: ClassVar[tuple[str, ...]] = ("LOAD_THREADS",)  # the make variables it reads
    protocols: ClassVar[tuple[str, ...]] = ("http1", "https1")  # PROTOCOL= values it speaks
    caveat: ClassVar[str] = ""
    version: str | None = None  # read by prepare()

    @classmethod
    def configured(cls, load_threads: int, load_workers: int) -> Wrk:
        """LOAD_THREADS threads."""
        return cls(load_threads)

    def prepare(self, log: Path) -> None:
        """wrk comes from the distro (bench/setup.sh): only its version is read."""
        self.version = wrk_version()

    def settings(self, concurrency: int) -> dict[str, int | None]:
        """Threads as wrk runs them (no more than connections); no workers."""
        return {"load_threads": min(self.threads, concurrency), "load_workers": None}

    def run(
        self,
        table: ProcessTable,
        request: LoadRequest,
        watch: Watch | None = None,
        sampler: Sampler | None = None,
    ) -> LoadResult:
        """Run wrk once; its text is left at <out>.wrk.txt and parsed."""
        out_path = request.out.with_name(request.out.name + ".wrk.txt")
        out_path.unlink(missing_ok=True)
        limit_s = request.duration_s + max(OVERSTAY_S, request.timeout_s + 5)
        argv = wrk_argv(request, self.threads)
        proc = run_bounded(table, "wrk", argv, out_path, limit_s, request, watch, sampler)
        text = out_path.read_text(errors="replace")
        if proc.exit_code() != 0:
            raise LoadError(f"wrk exited with {proc.exit_code()}: {text.strip()[-300:]}")
        try:
            return parse_wrk(text)
        except ParseError as exc:
            raise LoadError(f"unreadable wrk output: {exc}", {RAW_NAME: text}) from exc


def run_bare(table: ProcessTable, request: LoadRequest, threads: int) -> LoadResult:
    """Plain wrk (make overhead's baseline): no script, no sampler, no watchdog; its text left
    at <out>.bare.wrk.txt. LoadError when it fails."""
    out_path = request.out.with_name(request.out.name + ".bare.wrk.txt")
    argv = [
        wrk_binary(),
        f"-t{max(1, min(threads, request.concurrency))}",
        f"-c{request.concurrency}",
        f"-d{max(1, round(request.duration_s))}s",
        # the harness's timeout: a slow answer is the same error in both, not a difference
        f"--timeout={request.timeout_s}s",
        request.url,
    ]
    limit_s = request.duration_s + OVERSTAY_S
    proc = run_bounded(table, "wrk-bare", argv, out_path, limit_s, request)
    text = out_path.read_text(errors="replace")
    if proc.exit_code() != 0:
        raise LoadError(f"bare wrk exited with {proc.exit_code()}: {text.strip()[-300:]}")
    try:
        return parse_wrk(text)
    except ParseError as exc:
        raise LoadError(f"unreadable bare wrk output: {exc}") from exc


TOOL = Wrk
__all__ = ["DEFAULT_TIMEOUT_S", "TOOL", "Wrk", "parse_wrk", "run_bare", "wrk_argv", "wrk_version"]
