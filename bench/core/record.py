"""Records: one measured run -> one JSON file, written atomically and never overwritten.

Input: a Record and its raw outputs. Output: RESULTS/records/<stem>.json and
RESULTS/raw/<stem>.<suffix>; and back: every record below RESULTS (any sub-folder, so records
copied from other machines merge), with one problem line per file that is not a usable record.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import tempfile
from dataclasses import MISSING, asdict, dataclass, fields
from pathlib import Path

# Format history:
# 1: first format (2026-11): status/reason, server/app/scenario/concurrency/trial, arch,
#    load tool, knobs, requests/rps, latency_ms, errors (+by_status), db, verify, metadata.
# 2: + resources {server_cpu_pct, server_rss_mb, load_cpu_pct} and sockets {time_wait_before,
#    time_wait_max, time_wait_after, listen_queue_max, listen_overflows, listen_drops} (2026-11).
# 3: + proxy ("nginx" or null), keepalive {client, upstream}, backlog (the listen backlog
#    the kernel reports for the server's socket), load_workers, tasks (Locust, per task),
#    errors.proxy_by_status (from nginx's log), resources.proxy_cpu_pct, db.server_conns_max
#    (open), db.server_conns_active_max and db.clients_waiting_max (pgbouncer SHOW POOLS,
#    sampled once a second), sockets.time_wait_client_max, time_wait_upstream_max and
#    time_wait_db_max; time_wait_* now count only sockets that entered TIME_WAIT during the
#    run; target (TARGET=: a server elsewhere, no server-side samples); metadata.cpu_placement,
#    metadata.study*, metadata.emulator (2026-11).
# 4: + offered_rps (the arrival rate an open-loop tool was asked for; null for closed-loop
#    tools) and achieved_rps (successful responses per second; null for closed-loop tools);
#    latency_ms of open-loop runs is measured from each request's intended send time, and
#    errors may carry `other` and `aborted` (requests cut off by the tool's deadline) and
#    `by_message` (the tool's own error texts); raw files may be gzip-compressed (2026-11).
# 5: (2026-11, second round) keys for the statistics, load-balancer and production issues;
#    each key added is listed here:
#    metadata.machine_id (a stable hashed identity of the host: two hosts with one name stay
#    apart), metadata.machine_label (MACHINE=, the user's name for it).
#    cgroup {cpu_quota (CPUs), cgroup_version (v1/v2), quota_us, period_us, nr_periods,
#    nr_throttled, throttled_ms: cpu.stat deltas over the measured window; workers, the
#    server's workers and workers_rule, how they were chosen}: CPU_QUOTA= runs only.
#    lifecycle {event, signal, planned_at_s, at_s, failed, failed_by_class, p99_before_ms,
#    p99_around_ms, p99_after_ms, latency_limit_ms, recovery_s, disrupted_s}: LIFECYCLE=.
#    series {interval_s, leader_pid, t_s, rss_mb {pid: [MB per sample]}, rss_total_mb,
#    rss_slope_mb_per_h {slope, ci_low, ci_high, r}, minutes [{minute, responses_per_s,
#    non_2xx}]}: make soak.
#    recycles {max_requests, max_requests_jitter, workers_at_start, workers_started}: RECYCLE=
#    (+ late_arrivals, latency_limit_ms, arrivals from 16).
#    network: the load-balancer studies' namespace facts {namespace, sysctls set inside,
#      kernel_counters (TCP counter deltas read inside), time_wait_max, listen_queue_max,
#      proxy_error_reasons (nginx error-log reason -> count), race (the burst pattern)}.
#    - errors.by_status (wrk) may be {}: not counted by status (no proxy in front and no
#      failed status in the warmup); errors.non_2xx is wrk's own count either way.
# 6: (2026-11, third round) two keys, one version:
#    user_app {name, sha256 (files and requirements together), files_sha256, files,
#    requirements_sha256, entry (module:callable served), kind (wsgi/asgi), framework,
#    routes}: APP= runs only (null otherwise); their scenario is `<app name>:<route name>`,
#    app_framework the detected framework, verify.db_queries the routes' queries.
#    metadata.unsupported: on an unsupported record, what the server
#    lacks, one of UNSUPPORTED ("scenario": a route it does not serve; "emulation": not a
#    Python server, nothing to run under ARCH=; "reload", "recycle":
#    LIFECYCLE=reload, RECYCLE= without a [reload], [recycle] of its own). Older records say it
#    in `reason` only (unsupported_code reads both).
# 7: (2026-11, issue 24) container {image, image_id, image_tags, cpus, memory_bytes (the
#    engine's --cpus/--memory; null: none), network ("host"), name, engine {version,
#    cgroup_driver, cgroup_version}; over the measured window, from the container's own cgroup:
#    cgroup_version, quota_us, period_us, memory_limit_bytes, cpu_pct, nr_periods,
#    nr_throttled, throttled_ms, memory_mb_end, memory_peak_mb, memory_peak_scope (window or
#    container), oom_kills, memory_failcnt}: RUNTIME=docker runs only (metadata.runtime
#    "docker"); null otherwise.
# 8: (2026-11, issue 22 item 8) metadata.trials_auto {target (the 95 % interval's half-width
#    sought, a share of the estimate), budget_s, min_trials, max_trials}: TRIALS=auto runs
#    only; their trials past min_trials were added a round at a time until every point's
#    interval was within the target or the budget ended (bench.report.precision).
# 9: (2026-11, issue 24 item 5) container.network "host" or "bridge" (NETWORK=), and
#    container.subnet, container.address: the harness's bridge and the server's address on
#    it (null on the host network; absent before 9, read as null).
#    and (issue 24 item 4) container.memory_anon_mb_end (the cgroup's anonymous memory
#    at the window's end: v1 memory.stat total_rss, v2 anon) and container.oom_kills_total
#    (OOM kills in the container's cgroup since it started; on a failed run, as last read
#    before it ended): RUNTIME=docker runs only. Under a memory limit a worker the kernel
#    kills no longer voids the run: its kills and the requests it cut off are measured.
# 10: (2026-11, issue 30 items 1-3) identity and scope: metadata.session_id (one per harness
#    invocation), metadata.start_id (one per server start: a block's records share it),
#    metadata.boot_id (/proc/sys/kernel/random/boot_id); metadata.warmup_start (true on the
#    runs of a server's first start, the warm-up: kept, never analysed); foreign_cpu_percent
#    (CPU used by processes outside the harness's own trees, averaged over the measured window,
#    100 = one CPU), foreign_load (true above bench.observe.foreign.THRESHOLD_PERCENT: not
#    analysed, the run is repeated once) and foreign_top ([[process name, CPU %], ...], the
#    busiest foreign processes); metadata.repeat_of (the run_id of the run under foreign load
#    a repeat replaces). Older records have none of these: session_of() derives a stable
#    pseudo-session for them, start_of() a pseudo-start. Also (issue 30 items 4-5):
#    resources.worker_cpu_s {pid: CPU seconds over the measured window} of each process below
#    the server's leader ({} when it serves alone; null with TARGET=); metadata.noise {id,
#    round, start, warmup, design {rounds, starts, runs}} (make noise runs only);
#    metadata.trials_auto gained margin and max_looks (the race's equivalence margin and the
#    rounds its error is spent over; null with one server).
# 11: (2026-11, issue 31) metadata.tuned: on make bench's runs, the answer file of make tune
#    (relative to RESULTS, e.g. tuned/<machine>/granian_db_c50.json) whose configuration the
#    server was started with, null: the declared configuration (absent before 11: declared);
#    metadata.tune {objective (rps or p99)}: the runs of make tune's search, each
#    configuration's knobs in `knobs`.
#    Also in 11 (issue 35): metadata.cpu_mhz: the CPU's clock in MHz as the kernel reports it
#    (cpufreq's maximum, else /proc/cpuinfo's `cpu MHz`; null where neither says), one of
#    what else differs when the summary compares two machines. Older records: not recorded.
#    Also in 11 (issue 34): protocol (PROTOCOL=: http1, https1, h2c or h2),
#    tls (true when TLS wrapped the connections, with a certificate the harness made for the
#    run), streams (HTTP/2 requests in flight per connection: oha's -p; 1 otherwise);
#    metadata.unsupported may be "protocol" (a server whose server.toml does not declare the
#    protocol). Older records have none: read as http1 without TLS, one stream.
# 12: (2026-11, issue 30) metadata.slice: a race round's pass over its servers (1: in the
#    round's order, 2: back) when the configurations still racing were started together and
#    loaded in slices (bench/harness/slices.py); a round's figure is its slices' geometric
#    mean. Absent: the run had its server start to itself (every record before 12).
# 13: (2026-11, issue 34 item 2) websocket {mode (echo or push), message_bytes,
#    rate_per_connection (messages/s each connection sends, or is sent), connections_opened,
#    connections_held (open at the window's end), messages_sent, messages_received,
#    messages_per_s (verified messages in the window per second; also `rps` and
#    `achieved_rps`), offered_messages_per_s (connections x rate: also `offered_rps`, the
#    schedule paces it like an open-loop tool's arrivals), send_lag_ms {p50, p99, max} (how
#    late the generator sent against its schedule), load_ceiling_messages_per_s (the
#    generator's own ceiling on this machine), load_bound (messages_per_s >= 80 % of it)}:
#    SCENARIO=websocket and websocket-push runs only (null otherwise); their protocol is
#    "websocket" (tls false, streams 1), requests are messages, errors.by_status {"101":
#    connections held}, latency_ms runs from each message's intended send time;
#    metadata.unsupported "protocol" also for a server without [protocols.websocket].
# 14: (2026-11, issue 33) interpreter {python (PYTHON=: "3.13t", "3.13"; null: the usual
#    python3), version, build ("free-threaded" or "default"), gil_enabled (true/false as
#    sys._is_gil_enabled() answered inside the serving process, read by app_common's
#    /interpreter after the server's verification and again after the measured window: the
#    later read; null on a default build, where the GIL cannot be off, or when unread),
#    gil_came_back (true when a free-threaded build answered gil_enabled true at either read:
#    an extension turned the GIL back on; null on a default build)}: every run of a server
#    started here serving app_common (null otherwise: TARGET=, APP=, nginx-static, and every
#    record before 14). The summary labels a run whose GIL came back.
# 15: (2026-11, issues 31 item 5 and 34 item 1) metadata.study_tuned on a study's tuned arm
#    (the search that chose its knobs, in short: bench/studies/tuning.py), metadata.study_search
#    and study_search_arm on that search's own runs (with study_run and tune);
#    resources.server_rss_start_mb: the server tree's RSS at the measured window's first
#    sample, as the load tool started (before it connected): what the peak grew from; for
#    websocket-idle the first such sample of the server start (a repeat under foreign load, or
#    a later point on the same start, grows from where the start began: the memory the first
#    run freed is reused); websocket.mode "idle" (SCENARIO=websocket-idle: connections held,
#    no message; requests 0, offered_rps null). Absent on every record before 15: their growth
#    per connection is not known.
# 16: (2026-11, issue 32 item 8) lifecycle.late_arrivals and recycles.late_arrivals: the
#    arrivals of a LIFECYCLE=reload or RECYCLE= run answered 2xx but later than
#    latency_limit_ms (now in recycles too), with arrivals (those due in the window);
#    lifecycle.latency_limit_ms is now one fixed limit for every server
#    (bench.core.defaults.LATE_LIMIT_MS), which recovery_s is judged against too; before 16
#    it was 3 x the server's own p99 before the signal (at least +100 ms). Older records have
#    no late_arrivals: the report says "late not recorded".
# 17: (2026-11, issue 55 item 1) metadata.speed {start, latest, change, changed}: the host's
#    speed probe (bench.host.speed: fixed CPU work on every usable CPU) at the session's start
#    (the same in every record of a session) and the latest before the record was written,
#    each {version (PROBE_VERSION: figures of two versions are never compared), at,
#    ops_per_s (median over the CPUs of work units per wall second), per_cpu_ops_per_s,
#    cpu_wall_ratio (median CPU time / wall), steal_pct (/proc/stat's steal over the probe, %
#    of the CPUs' time; null: not counted), mhz, wall_s}; change = latest / start ops_per_s,
#    changed = |change - 1| > bench.core.defaults.SPEED_TOLERANCE (the host changed under the
#    session). Every probe of a session is in RESULTS/raw/speed-<session_id>.json. Older
#    records have no speed: speed_of() reads None (their host's speed is unknown).
#    Also in 17 (issue 60 item 1, same round, so no new version): app_flavor, which of
#    app_common's apps served the run (APP_FLAVOR=): "framework" (Flask/Quart) or "raw" (a
#    WSGI callable / ASGI app with no framework, app_common/raw_*.py; app_framework null);
#    absent on every earlier record: flavor_of() reads "framework", the only app there was.
FORMAT_VERSION = 17
KNOWN_VERSIONS = (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17)
# The version of bench.host.speed's work: changed whenever the work changes (its loop or its
# count) or how it is timed, so that figures of two versions are never compared (speed_of reads
# only this one). 1: the work timed whole (never in a shipped record); 2: each CPU's best of 8
# timed chunks (2026-11-29).
PROBE_VERSION = 2
STATUSES = ("ok", "failed", "unsupported")
UNSUPPORTED = ("scenario", "reload", "recycle", "emulation", "protocol")
# Before format 6: the reason's opening words (bench/harness/run.py wrote them) -> the code.
_UNSUPPORTED_BEFORE_6 = {
    "reload not supported by the server": "reload",
    "worker recycling not supported by the server": "recycle",
}


class RecordError(ValueError):
    """A JSON document that is not a record this code can read."""


@dataclass(frozen=True)
class Record:
    """One measured run (or one that could not be measured, with its reason)."""

    format_version: int
    status: str
    reason: str | None
    run_id: str
    server: str
    app: str
    app_framework: str | None
    scenario: str
    path: str
    concurrency: int
    trial: int
    duration_s: float
    arch: str
    host_arch: str
    emulated: bool
    load_tool: str
    load_tool_version: str | None
    load_threads: int | None
    knobs: dict
    requests: int | None
    rps: float | None
    latency_ms: dict | None
    errors: dict | None
    db: dict | None
    verify: dict | None
    metadata: dict
    raw_files: list[str]
    resources: dict | None = None
    sockets: dict | None = None
    proxy: str | None = None
    keepalive: dict | None = None
    backlog: int | None = None
    load_workers: int | None = None
    tasks: dict | None = None
    target: str | None = None
    offered_rps: float | None = None
    achieved_rps: float | None = None
    cgroup: dict | None = None
    lifecycle: dict | None = None
    series: dict | None = None
    recycles: dict | None = None
    network: dict | None = None
    user_app: dict | None = None
    container: dict | None = None
    foreign_cpu_percent: float | None = None
    foreign_load: bool | None = None
    foreign_top: list | None = None
    protocol: str | None = None  # PROTOCOL= (None: before format 11, http1)
    tls: bool | None = None
    streams: int | None = None
    websocket: dict | None = None  # SCENARIO=websocket's figures (format 13)
    interpreter: dict | None = None  # PYTHON= and the GIL as the server saw it (format 14)
    app_flavor: str | None = None  # APP_FLAVOR= (format 17; None: before it, "framework")

    def to_dict(self) -> dict:
        """The JSON-ready form."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> Record:
        """A Record from its JSON form; unknown keys are ignored, unknown versions refused."""
        if not isinstance(data, dict) or "format_version" not in data:
            raise RecordError("no format_version: not a record")
        if data["format_version"] not in KNOWN_VERSIONS:
            raise RecordError(
                f"format_version {data['format_version']!r} is unknown "
                f"(this code reads {list(KNOWN_VERSIONS)})"
            )
        names = [f.name for f in fields(cls)]
        # Keys added by later versions have defaults: older records load without them.
        required = [f.name for f in fields(cls) if f.default is MISSING]
        missing = [name for name in required if name not in data]
        if missing:
            raise RecordError(f"missing keys {missing}")
        if data["status"] not in STATUSES:
            raise RecordError(f"status {data['status']!r} is not one of {STATUSES}")
        return cls(**{name: data[name] for name in names if name in data})


INTERPRETER_KEYS = ("python", "version", "build", "gil_enabled", "gil_came_back")


def interpreter_fields(
    python: str | None, at_start: dict | None, after_window: dict | None
) -> dict | None:
    """The record's interpreter (format 14) from PYTHON= and the two reads of /interpreter
    (after verification, after the measured window; either may be None: unread)."""
    reads = [r for r in (at_start, after_window) if r is not None]
    if not reads:  # PYTHON= is known all the same: the record says what was asked
        return None if python is None else {**dict.fromkeys(INTERPRETER_KEYS), "python": python}
    last = reads[-1]
    free = last.get("build") == "free-threaded"
    return {
        "python": python,
        "version": last.get("version"),
        "build": last.get("build"),
        "gil_enabled": last.get("gil_enabled") if free else None,
        "gil_came_back": any(r.get("gil_enabled") is True for r in reads) if free else None,
    }


def python_of(rec: Record) -> str | None:
    """PYTHON= of a record (None: the usual python3, and every record before format 14)."""
    return (rec.interpreter or {}).get("python")


def flavor_of(rec: Record) -> str:
    """APP_FLAVOR= of a record: "framework" or "raw" ("framework" on records before it)."""
    return rec.app_flavor or "framework"


def gil_came_back(rec: Record) -> bool:
    """A free-threaded run whose server answered with the GIL on (format 14)."""
    return (rec.interpreter or {}).get("gil_came_back") is True


def speed_of(rec: Record) -> float | None:
    """The host's speed at the record's session start (metadata.speed.start.ops_per_s, format
    17); None on older records and on probes of another PROBE_VERSION."""
    start = (rec.metadata.get("speed") or {}).get("start") or {}
    if start.get("version") != PROBE_VERSION or start.get("ops_per_s") is None:
        return None
    return float(start["ops_per_s"])


def unsupported_code(rec: Record) -> str | None:
    """What an unsupported record's server lacks (one of UNSUPPORTED), or None: from
    metadata.unsupported, or from the reason of a record older than format 6."""
    if rec.status != "unsupported":
        return None
    code = rec.metadata.get("unsupported")
    if isinstance(code, str):
        return code
    reason = rec.reason or ""
    return next((c for text, c in _UNSUPPORTED_BEFORE_6.items() if reason.startswith(text)), None)


def _digest(*parts: object) -> str:
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()[:16]


def session_of(rec: Record) -> str:
    """The harness invocation a record comes from: metadata.session_id (format 10), or for an
    older record a stable pseudo-session "legacy-…": a hash of its machine (identity or host
    name), kernel build, CPU model, seed (drawn afresh per invocation unless SEED= was given)
    and study run, so that two invocations are never read as one unless they shared all five."""
    meta = rec.metadata
    session = meta.get("session_id")
    if session:
        return str(session)
    machine = meta.get("machine_id") or meta.get("hostname")
    keys = ("kernel", "cpu_model", "seed", "study_run")
    return "legacy-" + _digest(machine, *(meta.get(k) for k in keys))


def start_of(rec: Record) -> str:
    """The server start a record comes from: metadata.start_id (format 10), or for an older
    record a pseudo-start: its session, server and trial (one start per server and trial)."""
    start = rec.metadata.get("start_id")
    if start:
        return str(start)
    return "legacy-" + _digest(
        session_of(rec), rec.server, rec.trial, rec.metadata.get("study_arm")
    )


def of_study(rec: Record) -> bool:
    """A study's run: one of its arms' (metadata.study) or of the make tune search that
    chose a tuned arm's knobs (metadata.study_search: without `study`, so that the study's
    verdict never judges it). Shown in the study's section, never in the catalog's tables,
    plots and recommendations (workers-threads-tuned's searches made three "slow upstream"
    rows of the AMD recommendations, each "not enough evidence")."""
    return "study" in rec.metadata or "study_search" in rec.metadata


def is_warmup(rec: Record) -> bool:
    """A run of a server's first start in its session (metadata.warmup_start): measured and
    kept, never analysed (docs/method.md)."""
    return rec.metadata.get("warmup_start") is True


# Fewer requests than this in a window of a run under a container's memory limit: the server
# was thrashing (granian's 5 workers under --memory=121m: 17, 54 and 33 requests in 10 s), its
# p99 is its slowest request and its req/s a handful: no figure of the rate or the latency.
THRASH_REQUESTS = 100


def thrashed(rec: Record) -> bool:
    """An ok run under a container's memory limit whose window served fewer than
    THRASH_REQUESTS requests: every renderer says "too few requests to measure" (with the
    counts) instead of its req/s and latency, and the study engine leaves them out."""
    if rec.status != "ok" or (rec.container or {}).get("memory_bytes") is None:
        return False
    return rec.requests is not None and rec.requests < THRASH_REQUESTS


NEVER_RECYCLED = "not measured: no worker was recycled"


def never_recycled(rec: Record) -> bool:
    """A RECYCLE= run in which no worker was started (recycles.workers_started 0: meinheld's
    worker ignores max_requests): it measured the server without recycling, not recycling;
    every renderer says NEVER_RECYCLED instead of its figures."""
    return rec.recycles is not None and rec.recycles.get("workers_started") == 0


def analysed(rec: Record) -> bool:
    """A record whose figures may be pooled: ok, not a warm-up start, and not a run under
    foreign load that was repeated. A repeat stands for its run even when it was under
    foreign load too (on a machine that stays busy, dropping both would leave nothing):
    the summary names it (bench.report.disturbed)."""
    if rec.status != "ok" or is_warmup(rec):
        return False
    return rec.foreign_load is not True or bool(rec.metadata.get("repeat_of"))


def safe_name(text: str) -> str:
    """A file-name part: letters, digits, . and - (an APP= route is `<app>:<route>`)."""
    return re.sub(r"[^A-Za-z0-9.-]+", "-", text).strip("-") or "x"


def record_name(rec: Record) -> str:
    """File stem: start time, host, server, scenario, concurrency, trial, run id."""
    started = str(rec.metadata.get("started_at", "")).replace("-", "").replace(":", "")
    host = str(rec.metadata.get("hostname", "host"))
    parts = [
        started or "unknown-time",
        host,
        rec.server,
        rec.scenario,
        *([rec.proxy] if rec.proxy else []),
        *(["close"] if rec.keepalive and rec.keepalive.get("client") is False else []),
        *([rec.protocol] if rec.protocol not in (None, "http1") else []),
        *([f"p{rec.streams}"] if (rec.streams or 1) > 1 else []),
        *([f"q{rec.offered_rps:g}"] if rec.offered_rps is not None else []),
        f"c{rec.concurrency}",
        f"t{rec.trial}",
        rec.run_id[:8],
    ]
    return "_".join(safe_name(p) for p in parts)


FILE_MODE = 0o644  # results are for reading by anyone: mkstemp's 0600 would hide them


def replace_text(path: Path, text: str) -> None:
    """Replace path's content atomically (a reader sees the old or the new file, never half
    of one), world-readable; no temp file is left behind on failure."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=path.suffix)
    try:
        os.fchmod(fd, FILE_MODE)
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)  # e.g. path is a directory
        raise


def write_new(path: Path, data: bytes) -> None:
    """Write data to path through a temp file; never replace an existing file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=path.suffix)
    try:
        os.fchmod(fd, FILE_MODE)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        # link() fails if the name exists: an earlier record is never overwritten, and a
        # reader never sees a half-written file under the final name.
        os.link(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def write_record(results_dir: Path, rec: Record, raw: dict[str, str | bytes]) -> Path:
    """Write the raw outputs, then the record that lists them; FileExistsError if it exists."""
    stem = record_name(rec)
    path = results_dir / "records" / f"{stem}.json"
    if path.exists():
        raise FileExistsError(path)
    raw_files = []
    for suffix, text in sorted(raw.items()):
        if not text:
            continue
        raw_path = results_dir / "raw" / f"{stem}.{suffix}"
        write_new(raw_path, text.encode() if isinstance(text, str) else text)
        raw_files.append(str(raw_path.relative_to(results_dir)))
    data = {**rec.to_dict(), "raw_files": raw_files}
    write_new(path, (json.dumps(data, sort_keys=True, indent=2) + "\n").encode())
    return path


# The shipped reference run lives in results/reference/: a user's own RESULTS=results never
# merges it unless asked (REFERENCE=1); RESULTS=results/reference reads it as any other set.
REFERENCE_DIR = "reference"
# results/reference/pending-machines/<machine>/: the reference campaign of a machine other than
# the one results/reference is answered on, kept apart until it has answered more questions
# than that one (bench/cli/campaign.py): never read with the reference, nor with a user's runs.
PENDING_DIR = "pending-machines"


def pending(parts: tuple[str, ...]) -> bool:
    """Whether a path below a results directory (its parts) is in another machine's pending
    reference campaign: results/reference/pending-machines/... read from results/ (with
    REFERENCE=1) or from results/reference."""
    return parts[:1] == (PENDING_DIR,) or parts[:2] == (REFERENCE_DIR, PENDING_DIR)


# make tune's answers beside the records (bench.report.tuned): not records
TUNED_DIR = "tuned"


def load_records(
    results_dir: Path, with_reference: bool = False, exclude: Path | None = None
) -> tuple[list[Record], list[str]]:
    """Every record below results_dir (the shipped reference's only with_reference; none
    below `exclude`, another set nested in this one), and a line per JSON file that is not a
    usable one."""
    records, problems = [], []
    if not results_dir.exists():
        return records, problems
    nested = exclude.resolve() if exclude is not None else None
    for path in sorted(results_dir.rglob("*.json")):
        if nested is not None and path.resolve().is_relative_to(nested):
            continue
        parts = path.relative_to(results_dir).parts
        if path.name.startswith(".tmp-") or "raw" in parts[:-1] or parts[0] == TUNED_DIR:
            # raw outputs (oha's JSON among them) sit in raw/ beside the records, make tune's
            # answers in tuned/
            continue
        if (parts[0] == REFERENCE_DIR and not with_reference) or pending(parts):
            continue
        rel = path.relative_to(results_dir)
        try:
            records.append(Record.from_dict(json.loads(path.read_text())))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            problems.append(f"{rel}: unreadable JSON ({exc.__class__.__name__}), skipped")
        except (RecordError, TypeError) as exc:
            problems.append(f"{rel}: {exc}, skipped")
    return records, problems


def study_runs(records: list[Record]) -> list[str]:
    """The study runs (metadata.study_run) among records, oldest first."""
    return sorted({str(r.metadata.get("study_run", "")) for r in records})


def latest_per_arm(
    records: list[Record], study: str, declared: tuple[str, ...] | None = None
) -> list[Record]:
    """A study's records as its section shows them: per arm (metadata.study_arm), those of
    the latest run (metadata.study_run) that ran it, so a run of some arms (make study
    ARMS=) adds to the runs before it. An arm only an older run has is kept where `declared`
    (the study file's arm ids) names it, or `declared` is None; the latest run's arms always."""
    mine = [r for r in records if r.metadata.get("study") == study]
    if not mine:
        return []
    runs: dict[str, str] = {}
    for rec in mine:
        arm, run = str(rec.metadata.get("study_arm")), str(rec.metadata.get("study_run", ""))
        runs[arm] = max(run, runs.get(arm, run))
    newest = max(runs.values())
    keep = {
        arm: run
        for arm, run in runs.items()
        if run == newest or declared is None or arm in declared
    }
    return [
        r
        for r in mine
        if keep.get(str(r.metadata.get("study_arm"))) == str(r.metadata.get("study_run", ""))
    ]
