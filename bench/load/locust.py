"""Locust: the SaaS mix of users (seed 000), one process or a master and workers.

Input: a LoadRequest (users = its concurrency, the mix = its scenario). Output: a LoadResult
mapped from Locust's stats CSV and our per-status counts (status.json, written by
locust/saas.py), with per-task figures; the CSV is kept beside the record
(`locust_stats.csv`). Locust's users start cold, as the paper's did: no primer, no warmup.
"""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from bench.core import scenario
from bench.core.parse import ParseError
from bench.load import (
    OVERSTAY_S,
    Errors,
    Latency,
    LoadError,
    LoadRequest,
    LoadResult,
    Watch,
    wait_watching,
)

if TYPE_CHECKING:
    from bench.host.procs import Proc, ProcessTable
    from bench.observe.sample import Sampler

RAW_NAME = "locust_stats.csv"

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


def parse_locust(stats_csv: str, status_json: str | None, duration_s: float) -> LoadResult:
    """Locust's Aggregated row and our status counts -> the LoadResult a wrk run gives.

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
    return LoadResult(
        requests=requests,
        duration_s=duration_s,
        rps=requests / duration_s if duration_s else 0.0,
        bytes=None,
        latency=Latency(**latency),
        errors=Errors(
            connect=no_response,
            non_2xx=sum(v for k, v in by_status.items() if not 200 <= k < 300),
            by_status=dict(sorted(by_status.items())),
        ),
        raw={RAW_NAME: stats_csv},
        tasks=parse_locust_tasks(stats_csv),
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


LOCUST_DIR = Path(__file__).resolve().parents[2] / "locust"
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


def locust_run_args(host_url: str, users: int, duration_s: float, out_dir: Path) -> list[str]:
    """Locust's options for one headless run."""
    return [
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


def _start_distributed(
    table: ProcessTable,
    base: list[str],
    run_args: list[str],
    workers: int,
    out_dir: Path,
    env: dict[str, str],
    cpus: frozenset[int] | None,
    procs: list[Proc],
) -> Proc:
    from bench.host.ready import free_port

    port = free_port()
    master_args = ["--master", "--master-bind-host", "127.0.0.1", "--master-bind-port", str(port)]
    wait_args = ["--expect-workers", str(workers), "--expect-workers-max-wait", str(WORKERS_WAIT_S)]
    master = table.start(
        "locust-master",
        [*base, *run_args, *master_args, *wait_args],
        out_dir / "master.log",
        env=env,
        cpus=cpus,
    )
    procs.append(master)
    worker_args = ["--worker", "--master-host", "127.0.0.1", "--master-port", str(port)]
    for number in range(workers):
        procs.append(
            table.start(
                f"locust-worker-{number}",
                [*base, *worker_args, "--loglevel", "WARNING"],
                out_dir / f"worker-{number}.log",
                env=env,
                cpus=cpus,
            )
        )
    return master


def run_locust(
    table: ProcessTable,
    python: Path,
    host_url: str,
    scenario: str,
    users: int,
    duration_s: float,
    workers: int,
    out_dir: Path,
    watch: Watch | None = None,
    sampler: Sampler | None = None,
    cpus: frozenset[int] | None = None,
) -> Path:
    """Run Locust headless for duration_s with `users` users (all started within a second),
    as one process or (workers > 0) a master and `workers` worker processes on this machine;
    return the directory holding `locust_stats.csv` and `status.json`.

    Like wrk: every process in its own group, `watch` polled, the run bounded."""
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
    run_args = locust_run_args(host_url, users, duration_s, out_dir)
    procs: list[Proc] = []
    try:
        if workers:
            master = _start_distributed(table, base, run_args, workers, out_dir, env, cpus, procs)
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


@dataclass
class Locust:
    """Locust in its own venv (locust/), one process or a master and `workers`."""

    workers: int = 0
    name: ClassVar[str] = "locust"
    # Locust's users start cold, as the paper's did: no primer, no warmup.
    primes: ClassVar[bool] = False
    open_loop: ClassVar[bool] = False
    busy: ClassVar[bool] = False  # its users wait between requests (wait_time)
    drives: ClassVar[str] = scenario.MIX
    per_request: ClassVar[str | None] = None  # Locust's CSV holds buckets, not each request
    selectable: ClassVar[bool] = True
    default: ClassVar[bool] = False
    variables: ClassVar[tuple[str, ...]] = ("LOCUST_WORKERS",)  # the make variables it reads
    protocols: ClassVar[tuple[str, ...]] = ("http1",)  # PROTOCOL= values it speaks
    # its percentiles are buckets (see above) and its users wait between tasks (wait_time):
    # a p99 of "3,000" is a 3 s upstream call's bucket, and req/s is the users' own pace
    caveat: ClassVar[str] = (
        "Locust: percentiles are its response-time buckets (1 ms below 100 ms, 10 ms below "
        "1 s, 100 ms below 10 s) and req/s is set by its users' own pacing (wait_time), not "
        "by the server's capacity"
    )
    python: Path | None = None
    version: str | None = None  # read by prepare()

    @classmethod
    def configured(cls, load_threads: int, load_workers: int) -> Locust:
        """LOCUST_WORKERS worker processes (0: one local process)."""
        return cls(load_workers)

    def prepare(self, log: Path) -> None:
        """Locust's venv, created with uv from locust/requirements.txt when stale."""
        from bench.host.venv import VenvError, make_venv

        try:
            self.python = make_venv("_locust", LOCUST_DIR / "requirements.txt", log=log)
        except VenvError as exc:
            raise LoadError(f"Locust's venv: {exc}") from exc
        self.version = locust_version(self.python)

    def settings(self, concurrency: int) -> dict[str, int | None]:
        """No threads; the worker processes (0: one local process)."""
        return {"load_threads": None, "load_workers": self.workers}

    def run(
        self,
        table: ProcessTable,
        request: LoadRequest,
        watch: Watch | None = None,
        sampler: Sampler | None = None,
    ) -> LoadResult:
        """Run the mix once; parse its stats CSV and status counts."""
        if self.python is None:
            raise LoadError("Locust is not prepared")
        out = run_locust(
            table,
            self.python,
            request.base_url,
            request.scenario,
            request.concurrency,
            request.duration_s,
            self.workers,
            request.out.with_name(request.out.name + "-locust"),
            watch=watch,
            sampler=sampler,
            cpus=request.cpus,
        )
        text = (out / "locust_stats.csv").read_text()
        status_file = out / "status.json"
        status = status_file.read_text() if status_file.exists() else None
        try:
            return parse_locust(text, status, request.duration_s)
        except ParseError as exc:
            raise LoadError(f"unreadable Locust statistics: {exc}", {RAW_NAME: text}) from exc


TOOL = Locust
