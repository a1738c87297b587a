"""Load generation: wrk against one URL for a bounded time.

Input: URL, concurrency, duration, threads. Output: wrk's raw text (with the JSON line our
Lua script adds), kept beside the record and parsed by bench.parse. wrk runs in its own
process group under the ProcessTable, so Ctrl-C stops it with everything else; it always
ends by itself after `-d`, and the harness kills it if it overstays by 30 s.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from bench.procs import ProcessTable
from bench.sample import Sampler

WRK_SCRIPT = Path(__file__).resolve().parent / "wrk_report.lua"
# A response slower than this counts as a timeout error rather than a latency sample.
WRK_TIMEOUT_S = 10
OVERSTAY_S = 30


class LoadError(RuntimeError):
    """The load tool failed to run (not: the server answered with errors)."""


class LoadAborted(RuntimeError):
    """The watchdog saw the stack break during load; wrk was stopped early."""


WATCH_INTERVAL_S = 0.5


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


def default_load_threads() -> int:
    """Half the usable CPUs (at least 1): the other half is the server's."""
    return max(1, len(os.sched_getaffinity(0)) // 2)


def run_wrk(
    table: ProcessTable,
    url: str,
    concurrency: int,
    duration_s: float,
    threads: int,
    out_path: Path,
    headers: tuple[str, ...] = (),
    watch: Callable[[], str | None] | None = None,
    sampler: Sampler | None = None,
    cpus: frozenset[int] | None = None,
    timeout_s: int = WRK_TIMEOUT_S,
) -> str:
    """Run wrk once; return its output text (also left at out_path).

    `watch` is polled while wrk runs; when it returns a reason (the server died, ...) wrk is
    stopped at once and LoadAborted(reason) raised, instead of measuring a dead stack.
    """
    threads = max(1, min(threads, concurrency))
    argv = [
        wrk_binary(),
        f"-t{threads}",
        f"-c{concurrency}",
        f"-d{max(1, round(duration_s))}s",
        f"--timeout={timeout_s}s",
        "--latency",
        "-s",
        str(WRK_SCRIPT),
    ]
    for header in headers:
        argv += ["-H", header]
    argv.append(url)
    out_path.unlink(missing_ok=True)
    proc = table.start("wrk", argv, out_path, env={"PATH": os.environ.get("PATH", "")}, cpus=cpus)
    deadline = time.monotonic() + duration_s + max(OVERSTAY_S, timeout_s + 5)
    if sampler is not None:
        sampler.load_pid = proc.pid
        sampler.start()
    try:
        while proc.exit_code() is None:
            if time.monotonic() > deadline:
                raise LoadError(f"wrk did not finish within {duration_s + OVERSTAY_S:.0f} s")
            reason = watch() if watch is not None else None
            if reason is not None:
                raise LoadAborted(reason)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.popen.wait(timeout=WATCH_INTERVAL_S)
    finally:
        if sampler is not None:
            sampler.stop()
        table.stop(proc, grace_s=2)
    text = out_path.read_text(errors="replace")
    if proc.exit_code() != 0:
        raise LoadError(f"wrk exited with {proc.exit_code()}: {text.strip()[-300:]}")
    return text
