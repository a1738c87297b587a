"""Load-balancer studies (issue 15): each arm in a network namespace of the harness's own.

Input: the study files (bench.studies.lbfile). Output: per arm, its measurement in a fresh namespace
(measure_arm -> ArmRun), then one record per arm (bench.studies.lbrecord) (metadata.study, and
`network`: the namespace's sysctls, the kernel's TCP counter deltas read inside it, the
TIME_WAIT and accept-queue peaks, nginx's error-log reasons), written like every record,
and the exit status (0 ok, 1 an arm failed, 130 interrupted). Every arm gets a fresh
namespace: its sysctls differ from the next arm's, and a namespace dies with the arm.
Without root the study is refused before anything starts (exit 2).
"""

from __future__ import annotations

import os
import sys
import time
import uuid
from dataclasses import replace
from pathlib import Path

from bench.core import record
from bench.core.parse import parse_proxy_errors, parse_proxy_log
from bench.core.registry import load_all, resolve_knobs
from bench.core.runid import run_dir_name, study_run_id
from bench.host import netns
from bench.host.metadata import host_metadata, now_iso
from bench.host.procs import Interrupted, ProcessTable, StartError, signals_ignored, signals_raise
from bench.host.state import LockedError, run_lock, state_base
from bench.host.venv import ensure_venv
from bench.load.oha import run_oha
from bench.load.race import gaps_around, probe_idle_close, run_race, within_budget
from bench.stack import namespace as nsstack
from bench.studies.lbfile import LbArm, is_race, load_lb_study
from bench.studies.lbrecord import ArmRun, to_record
from bench.studies.study import resolve_knob_expressions

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


def counter_deltas(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """COUNTERS' increase over the run (absent from this kernel: left out)."""
    return {k: after[k] - before.get(k, 0) for k in COUNTERS if k in after}


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
                    rounds = int(arm.get("race_rounds", 10)) if gaps else 0  # type: ignore[arg-type]
                    budget = arm.get("race_budget")
                    if budget is not None:
                        close = out.idle_close_s
                        gaps, rounds = within_budget(
                            gaps,
                            rounds,
                            float(budget),
                            round(close * 1000) if close else None,  # type: ignore[arg-type]
                        )
                    out.race = run_race(ns, url, gaps, int(arm.get("race_burst", 20)), rounds)  # type: ignore[arg-type]
                else:
                    out.oha_json = run_oha(
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
    study_run = study_run_id()
    base = state_base()
    run_dir = base / "runs" / run_dir_name(f"{os.getpid()}-lb")
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
                        rec, raw = to_record(
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
                    rec, raw = to_record(
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
