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

from bench.procs import Proc, ProcessTable
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


def wait_watching(proc: Proc, limit_s: float, watch: Callable[[], str | None] | None) -> None:
    """Wait for the load tool to end by itself, polling `watch` every 0.5 s: LoadAborted with
    its reason when the stack breaks, LoadError past limit_s (the caller stops the process)."""
    deadline = time.monotonic() + limit_s
    while proc.exit_code() is None:
        if time.monotonic() > deadline:
            raise LoadError(f"{proc.name} did not finish within {limit_s:.0f} s")
        reason = watch() if watch is not None else None
        if reason is not None:
            raise LoadAborted(reason)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.popen.wait(timeout=WATCH_INTERVAL_S)


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
    limit_s = duration_s + max(OVERSTAY_S, timeout_s + 5)
    if sampler is not None:
        sampler.load_pid = proc.pid
        sampler.start()
    try:
        wait_watching(proc, limit_s, watch)
    finally:
        if sampler is not None:
            sampler.stop()
        table.stop(proc, grace_s=2)
    text = out_path.read_text(errors="replace")
    if proc.exit_code() != 0:
        raise LoadError(f"wrk exited with {proc.exit_code()}: {text.strip()[-300:]}")
    return text


# -- Locust ------------------------------------------------------------------------------------

LOCUST_DIR = Path(__file__).resolve().parent / "locust"
LOCUSTFILES = {"saas": LOCUST_DIR / "saas.py"}
# How long Locust's master waits for its workers to connect before it gives up.
WORKERS_WAIT_S = 30


def locust_version(python: Path) -> str | None:
    """Locust's version in its venv, e.g. `2.47.0`."""
    result = subprocess.run(
        [str(python), "-m", "locust", "--version"], capture_output=True, text=True, timeout=60
    )
    words = (result.stdout + result.stderr).split()
    return words[1] if len(words) > 1 and words[0] == "locust" else None


def run_locust(
    table: ProcessTable,
    python: Path,
    host_url: str,
    scenario: str,
    users: int,
    duration_s: float,
    workers: int,
    out_dir: Path,
    watch: Callable[[], str | None] | None = None,
    sampler: Sampler | None = None,
    cpus: frozenset[int] | None = None,
) -> Path:
    """Run Locust headless for duration_s with `users` users (all started within a second),
    as one process or (workers > 0) a master and `workers` worker processes on this machine;
    return the directory holding `locust_stats.csv` and `status.json`.

    Like run_wrk: every process in its own group, `watch` polled, the run bounded."""
    out_dir.mkdir(parents=True, exist_ok=True)
    status_file = out_dir / "status.json"
    status_file.unlink(missing_ok=True)
    base = [str(python), "-m", "locust", "-f", str(LOCUSTFILES[scenario])]
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(out_dir),
        "LOCUST_STATUS_FILE": str(status_file),
        "PYTHONUNBUFFERED": "1",
    }
    run_args = [
        "--headless",
        "--host",
        host_url,
        "-u",
        str(users),
        # every user at once, as wrk opens every connection at once
        "-r",
        str(users),
        "-t",
        f"{max(1, round(duration_s))}s",
        # users finish the request in flight (the 3 s call) before Locust stops
        "--stop-timeout",
        "10",
        "--csv",
        str(out_dir / "locust"),
        "--only-summary",
        "--exit-code-on-error",
        "0",
        "--loglevel",
        "WARNING",
    ]
    procs = []
    try:
        if workers:
            from bench.ready import free_port

            port = free_port()
            master = table.start(
                "locust-master",
                [
                    *base,
                    *run_args,
                    "--master",
                    "--master-bind-host",
                    "127.0.0.1",
                    "--master-bind-port",
                    str(port),
                    "--expect-workers",
                    str(workers),
                    "--expect-workers-max-wait",
                    str(WORKERS_WAIT_S),
                ],
                out_dir / "master.log",
                env=env,
                cpus=cpus,
            )
            procs.append(master)
            for number in range(workers):
                procs.append(
                    table.start(
                        f"locust-worker-{number}",
                        [
                            *base,
                            "--worker",
                            "--master-host",
                            "127.0.0.1",
                            "--master-port",
                            str(port),
                            "--loglevel",
                            "WARNING",
                        ],
                        out_dir / f"worker-{number}.log",
                        env=env,
                        cpus=cpus,
                    )
                )
        else:
            master = table.start(
                "locust", [*base, *run_args], out_dir / "locust.log", env=env, cpus=cpus
            )
            procs.append(master)
        if sampler is not None:
            sampler.load_pid = master.pid
            sampler.extra_load_pids = [p.pid for p in procs[1:]]
            sampler.start()
        try:
            wait_watching(master, duration_s + WORKERS_WAIT_S + 10 + OVERSTAY_S, watch)
        finally:
            if sampler is not None:
                sampler.stop()
    finally:
        for proc in reversed(procs):
            table.stop(proc, grace_s=5)
    if master.exit_code() != 0:
        tail = master.log_tail(5)
        raise LoadError(f"Locust exited with {master.exit_code()}: {tail}")
    if not (out_dir / "locust_stats.csv").exists():
        raise LoadError(f"Locust wrote no statistics: {master.log_tail(5)}")
    return out_dir
