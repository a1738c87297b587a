"""Load-balancer studies (issue 15): each arm in a network namespace of the harness's own.

Input: bench/lbstudies/<name>.toml (a [run] table and arms: server and knobs, the front
(none, nginx, alb), upstream keep-alive, the sysctls set inside the arm's namespace, oha's
arrival rate or burst pattern, route). Output: one record per arm (metadata.study, and
`network`: the namespace's sysctls, the kernel's TCP counter deltas read inside it, the
TIME_WAIT and accept-queue peaks, nginx's error-log reasons), written like every record,
and the exit status (0 ok, 1 an arm failed, 130 interrupted). Every arm gets a fresh
namespace: its sysctls differ from the next arm's, and a namespace dies with the arm.
Without root the study is refused before anything starts (exit 2).
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
import tomllib
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path

from bench import netns, nsstack, record
from bench.arch import host_arch
from bench.load.oha import OhaParseError, parse_oha
from bench.metadata import host_metadata, now_iso
from bench.parse import parse_proxy_errors, parse_proxy_log
from bench.procs import Interrupted, ProcessTable, StartError, signals_ignored, signals_raise
from bench.race import RaceResult, gaps_around, probe_idle_close, run_race
from bench.registry import load_all, resolve_knobs
from bench.state import LockedError, run_lock, state_base
from bench.study import StudyError, resolve_knob_expressions
from bench.venv import ensure_venv, tool_version

LB_DIR = Path(__file__).resolve().parent / "lbstudies"
FRONTS = ("none", "nginx", "alb")
# The kernel's counters of the accept queue and of resets, read inside the namespace. There
# is no TCPAbortOnOverflow counter: an abort on overflow is counted as EmbryonicRsts
# (tcp_check_req's embryonic_reset path), a SYN dropped on a full queue as ListenOverflows
# and ListenDrops.
COUNTERS = (
    "TcpExtListenOverflows",
    "TcpExtListenDrops",
    "TcpExtEmbryonicRsts",
    "TcpOutRsts",
    "TcpAttemptFails",
    "TcpPassiveOpens",
    "TcpActiveOpens",
    "TcpExtTCPTimeouts",
    "TcpExtTCPSynRetrans",
)
# [run] or an arm may set these (the type each must have).
SETTINGS: dict[str, type] = {
    "front": str,
    "upstream_keepalive": bool,
    "client_keepalive": bool,
    "proxy_timeout": int,
    "sysctls": dict,
    "path": str,
    "rate": int,
    "connections": int,
    "duration": int,
    "timeout": int,
    "knobs": dict,
    "race_gaps_ms": list,
    "race_burst": int,
    "race_rounds": int,
    # Measure the server's idle close first (seconds allowed), and set the race's gaps at
    # these offsets (ms) from it: the timeout is measured, not taken from the declaration.
    "probe_limit": int,
    "race_offsets_ms": list,
}
TOP = ("title", "source", "claim", "differs", "run", "arm", "expect")
# Optional: the source's figures per arm ({arm id = failed %}), shown beside ours.


@dataclass(frozen=True)
class LbArm:
    """One arm: a server behind a front in a namespace with its sysctls."""

    id: str
    label: str
    server: str
    settings: dict

    def get(self, key: str, default: object = None) -> object:
        """A setting of the arm, else of [run]."""
        return self.settings.get(key, default)


@dataclass(frozen=True)
class LbStudy:
    """A load-balancer study file, validated."""

    name: str
    title: str
    source: str
    claim: str
    differs: str
    expect: str
    arms: tuple[LbArm, ...]
    published: dict[str, float] = field(default_factory=dict)


def lb_study_names() -> list[str]:
    """Every load-balancer study (bench/lbstudies/*.toml)."""
    return sorted(p.stem for p in LB_DIR.glob("*.toml"))


def _check(path: Path, where: str, settings: dict) -> None:
    for key, value in settings.items():
        kind = SETTINGS.get(key)
        if kind is None:
            raise StudyError(
                f"{path}: {where} sets unknown key {key!r}; valid: {', '.join(SETTINGS)}"
            )
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise StudyError(f"{path}: {where} {key} must be a {kind.__name__}")
    if settings.get("front", "none") not in FRONTS:
        raise StudyError(f"{path}: {where} front must be one of {', '.join(FRONTS)}")


def load_lb_study(name: str) -> LbStudy:
    """Read and validate bench/lbstudies/<name>.toml (StudyError names file and key)."""
    path = LB_DIR / f"{name}.toml"
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise StudyError(f"{path}: {exc}") from None
    missing = [k for k in TOP if k not in data]
    if missing:
        raise StudyError(f"{path}: missing {', '.join(missing)}")
    _check(path, "[run]", data["run"])
    known = set(load_all())
    arms = []
    for raw in data["arm"]:
        arm_id, label, server = raw.get("id"), raw.get("label"), raw.get("server")
        if not all(isinstance(v, str) for v in (arm_id, label, server)):
            raise StudyError(f"{path}: each arm needs the strings id, label, server")
        if server not in known:
            raise StudyError(f"{path}: arm {arm_id} names unknown server {server!r}")
        own = {k: v for k, v in raw.items() if k not in ("id", "label", "server")}
        _check(path, f"arm {arm_id}", own)
        settings = {**data["run"], **own}
        settings["sysctls"] = {**data["run"].get("sysctls", {}), **own.get("sysctls", {})}
        arms.append(LbArm(arm_id, label, server, settings))
    return LbStudy(
        name,
        data["title"],
        data["source"],
        data["claim"].strip(),
        data["differs"].strip(),
        data["expect"].strip(),
        tuple(arms),
        _published(path, data.get("published", {}), {a.id for a in arms}),
    )


def _published(path: Path, raw: object, arm_ids: set[str]) -> dict[str, float]:
    if not isinstance(raw, dict) or not all(
        k in arm_ids and isinstance(v, int | float) for k, v in raw.items()
    ):
        raise StudyError(f"{path}: `published` must map arm ids to numbers (failed %)")
    return {str(k): float(v) for k, v in raw.items()}


def is_race(arm: LbArm) -> bool:
    """An arm of the keep-alive race (bursts and gaps, not oha)."""
    return arm.get("race_gaps_ms") is not None or arm.get("race_offsets_ms") is not None


def counter_deltas(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """COUNTERS' increase over the run (absent from this kernel: left out)."""
    return {k: after[k] - before.get(k, 0) for k in COUNTERS if k in after}


@dataclass
class ArmRun:
    """What one arm measured, before it becomes a record."""

    oha_json: str | None = None
    race: RaceResult | None = None
    idle_close_s: float | None = None
    network: dict | None = None
    proxy_statuses: dict[int, int] | None = None
    knobs: dict[str, int] | None = None
    argv: list[str] | None = None
    backlog: int | None = None


def measure_arm(table: ProcessTable, spaces: netns.Namespaces, arm: LbArm, run_dir: Path) -> ArmRun:
    """Namespace with the arm's sysctls, server, front, load; everything stopped after."""
    run_dir.mkdir(parents=True, exist_ok=True)
    spec = load_all()[arm.server]
    cpus = len(os.sched_getaffinity(0))
    overrides = resolve_knob_expressions(dict(arm.get("knobs", {})), cpus)  # type: ignore[arg-type]
    knobs = resolve_knobs(spec, cpus, overrides)
    python = ensure_venv(spec)
    out = ArmRun(knobs=knobs, backlog=knobs.get("backlog"))
    sysctls = {k: str(v) for k, v in dict(arm.get("sysctls", {})).items()}
    started = len(table.procs)
    with spaces.created(sysctls) as ns:
        try:
            _, out.argv = nsstack.start_server(table, ns, run_dir, spec, knobs, python)
            front = str(arm.get("front", "none"))
            proxy = None
            port = nsstack.SERVER_PORT
            if front != "none":
                proxy = nsstack.start_proxy(
                    table,
                    ns,
                    run_dir,
                    front,
                    bool(arm.get("upstream_keepalive", True)),
                    int(arm.get("proxy_timeout", 60)),
                    spec.ready_path,
                )
                port = nsstack.PROXY_PORT
            url = f"http://127.0.0.1:{port}{arm.get('path', '/plaintext')}"
            probe_limit = int(arm.get("probe_limit", 0))  # type: ignore[arg-type]
            mark = proxy.error_log.stat().st_size if proxy and proxy.error_log.exists() else 0
            sampler = nsstack.SocketSampler(ns)
            before = ns.netstat()
            since = time.time()
            sampler.start()
            try:
                if is_race(arm):
                    gaps = [int(g) for g in arm.get("race_gaps_ms") or []]  # type: ignore[attr-defined]
                    if probe_limit:
                        out.idle_close_s = probe_idle_close(
                            ns, nsstack.SERVER_PORT, str(arm.get("path", "/plaintext")), probe_limit
                        )
                        offsets = [int(o) for o in arm.get("race_offsets_ms") or []]  # type: ignore[attr-defined]
                        if offsets and out.idle_close_s:
                            gaps = gaps_around(out.idle_close_s, offsets)
                    # Kept open the whole probe (past the balancer's idle timeout), or never
                    # kept open: no gap can race; the record says which.
                    out.race = run_race(
                        ns,
                        url,
                        gaps,
                        int(arm.get("race_burst", 20)),
                        int(arm.get("race_rounds", 10)) if gaps else 0,
                    )
                else:
                    out.oha_json = nsstack.run_oha(
                        table,
                        ns,
                        run_dir / arm.id,
                        url,
                        int(arm.get("rate", 100)),
                        int(arm.get("connections", 10)),
                        int(arm.get("duration", 5)),
                        int(arm.get("timeout", 10)),
                        bool(arm.get("client_keepalive", True)),
                    )
            finally:
                sampler.stop()
            until = time.time()
            counters = counter_deltas(before, ns.netstat())
            reasons: dict[str, int] = {}
            if proxy is not None:
                time.sleep(0.2)  # nginx writes a line when a request ends
                reasons = parse_proxy_errors(_read_from(proxy.error_log, mark))
                out.proxy_statuses = parse_proxy_log(
                    _read_from(proxy.access_log, 0), since, until + 1
                )
            out.network = {
                "namespace": ns.name,
                "sysctls": dict(ns.sysctls),
                "kernel_counters": counters,
                "time_wait_max": sampler.time_wait_max,
                "listen_queue_max": sampler.listen_queue_max,
                "proxy_error_reasons": reasons,
            }
        finally:
            # The namespace disappears only when nothing of ours runs in it any more.
            for proc in list(table.procs[started:]):
                table.stop(proc)
    return out


def _read_from(path: Path, mark: int) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(mark)
            return fh.read().decode(errors="replace")
    except OSError:
        return ""


def _record(
    study: LbStudy,
    arm: LbArm,
    run_id: str,
    study_run: str,
    host: dict,
    started_at: str,
    measured: ArmRun | None,
    reason: str | None,
) -> tuple[record.Record, dict[str, str]]:
    spec = load_all()[arm.server]
    front = str(arm.get("front", "none"))
    rate = None if is_race(arm) else float(arm.get("rate", 100))
    duration = float(arm.get("duration", 5))
    requests = rps = achieved = None
    latency = errors = None
    raw: dict[str, str] = {}
    status = "failed" if reason else "ok"
    if measured is not None and measured.oha_json is not None:
        raw["oha.json"] = measured.oha_json
        try:
            parsed = parse_oha(measured.oha_json, offered_rps=rate)
            requests, duration = parsed.responses, parsed.duration_s
            rps = parsed.responses / duration if duration > 0 else 0.0
            achieved, latency = parsed.achieved_rps, parsed.latency_ms
            # Arrivals oha scheduled but never sent (every connection busy at the deadline)
            # are in none of its counts (bench.load.oha.to_load_result).
            scheduled = math.floor(float(rate or 0) * (float(arm.get("duration", 5)) - 0.01))
            errors = {
                **parsed.errors,
                "unsent": max(0, scheduled - parsed.requests),
                "aborted": parsed.aborted,
                "by_status": {str(k): v for k, v in parsed.by_status.items()},
                "by_message": parsed.error_distribution,
            }
        except OhaParseError as exc:
            status, reason = "failed", f"unreadable oha output: {exc}"
    if measured is not None and measured.race is not None:
        race = measured.race
        requests, duration = race.requests, race.duration_s
        rps = requests / duration if duration > 0 else 0.0
        errors = {
            "by_status": {str(k): v for k, v in sorted(race.by_status.items())},
            "by_message": race.errors,
            "non_2xx": sum(v for k, v in race.by_status.items() if not 200 <= k < 300),
            "other": sum(race.errors.values()),
        }
        raw["race.json"] = json.dumps(race.to_dict(), sort_keys=True, indent=1)
    if errors is not None and measured is not None and measured.proxy_statuses is not None:
        errors["proxy_by_status"] = {str(k): v for k, v in measured.proxy_statuses.items()}
    network = measured.network if measured is not None else None
    if network is not None and measured is not None and measured.race is not None:
        probe = {"probe_limit_s": arm.get("probe_limit"), "idle_close_s": measured.idle_close_s}
        network = {**network, "race": {**measured.race.summary(), **probe}}
    sockets = None
    if network is not None:
        kernel = network["kernel_counters"]
        sockets = {
            "time_wait_max": network["time_wait_max"],
            "listen_queue_max": network["listen_queue_max"],
            "listen_overflows": kernel.get("TcpExtListenOverflows"),
            "listen_drops": kernel.get("TcpExtListenDrops"),
        }
    rec = record.Record(
        format_version=record.FORMAT_VERSION,
        status=status,
        reason=reason,
        run_id=run_id,
        server=arm.server,
        app=spec.app,
        app_framework={"wsgi": "flask", "asgi": "quart"}.get(spec.app),
        scenario="plaintext",
        path=str(arm.get("path", "/plaintext")),
        concurrency=int(arm.get("connections", arm.get("race_burst", 10))),  # type: ignore[arg-type]
        trial=1,
        duration_s=duration,
        arch=host_arch(),
        host_arch=host_arch(),
        emulated=False,
        load_tool="oha" if rate is not None else "race",
        load_tool_version=tool_version([str(nsstack.oha_binary()), "--version"]),
        load_threads=None,
        knobs=(measured.knobs if measured else None) or {},
        requests=requests,
        rps=rps,
        latency_ms=latency,
        errors=errors,
        db=None,
        verify=None,
        metadata={
            **host,
            "started_at": started_at,
            "ended_at": now_iso(),
            "study": study.name,
            "study_arm": arm.id,
            "study_run": study_run,
            **({"argv": measured.argv} if measured and measured.argv else {}),
        },
        raw_files=[],
        sockets=sockets,
        proxy=None if front == "none" else front,
        keepalive={
            "client": bool(arm.get("client_keepalive", True)),
            "upstream": None if front == "none" else bool(arm.get("upstream_keepalive", True)),
        },
        backlog=measured.backlog if measured else None,
        offered_rps=rate,
        achieved_rps=achieved,
        network=network,
    )
    return rec, raw


def execute(
    names: list[str], results: Path, write_summary: object, duration: int | None = None
) -> int:
    """make study for load-balancer studies: every arm of every named study, a record each,
    summary.md rebuilt; the exit status."""
    problem = netns.root_problem()
    if problem is not None:
        print(f"bench: study {', '.join(names)} {problem}", file=sys.stderr)
        return 2
    studies = [load_lb_study(n) for n in names]
    host = host_metadata()
    study_run = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    base = state_base()
    run_dir = base / "runs" / f"{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}-lb"
    status = 0
    table = ProcessTable()
    try:
        with run_lock(base), signals_raise():
            spaces = netns.Namespaces(table)
            for study in studies:
                for arm in study.arms:
                    if duration is not None and "duration" in arm.settings:
                        arm = replace(arm, settings={**arm.settings, "duration": duration})
                    arm_dir = run_dir / study.name / arm.id
                    arm_dir.mkdir(parents=True, exist_ok=True)
                    started_at = now_iso()
                    print(f"bench: {study.name} {arm.id}: {arm.label}", file=sys.stderr)
                    measured, reason = None, None
                    try:
                        measured = measure_arm(table, spaces, arm, arm_dir)
                    except (StartError, netns.NetnsError, OSError) as exc:
                        reason = str(exc).splitlines()[0] if str(exc) else repr(exc)
                        status = max(status, 1)
                    except (KeyboardInterrupt, Interrupted) as exc:
                        # The interrupted arm is recorded as failed, then the run stops.
                        rec, raw = _record(
                            study,
                            arm,
                            uuid.uuid4().hex,
                            study_run,
                            host,
                            started_at,
                            None,
                            f"interrupted ({exc or 'SIGINT'})",
                        )
                        with signals_ignored():
                            table.stop_all()
                            record.write_record(results, rec, raw)
                        raise
                    rec, raw = _record(
                        study, arm, uuid.uuid4().hex, study_run, host, started_at, measured, reason
                    )
                    if rec.status != "ok":
                        status = max(status, 1)
                    path = record.write_record(results, rec, raw)
                    print(f"bench: {study.name} {arm.id}: {rec.status} -> {path}", file=sys.stderr)
    except LockedError as exc:
        print(f"bench: {exc}", file=sys.stderr)
        return 1
    except (KeyboardInterrupt, Interrupted):
        status = 130
    finally:
        with signals_ignored():
            table.stop_all()
    write_summary()  # type: ignore[operator]
    return status
