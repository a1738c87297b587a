"""An arm measured in a network namespace of its own (`namespace = true` in a study file).

Input: the study, the arm, its Options (bench.studies.arms), the ProcessTable, the harness's
namespaces and the arm's run directory. Output: ArmRun (measure_arm): the server, the proxy
in front when the arm asks for one, and oha at the arm's rate or the keep-alive race
(bench.load.race), in a fresh namespace with the arm's sysctls, and the namespace's facts
(`network`: sysctls, the kernel's TCP counter deltas read inside it, TIME_WAIT and
accept-queue peaks, nginx's error-log reasons); then its record, written by the Recorder
(record_arm). Every arm gets a fresh namespace: its sysctls differ from the next arm's, and
a namespace dies with the arm.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from bench.core import plan
from bench.core.parse import parse_proxy_errors, parse_proxy_log
from bench.core.registry import ServerSpec, load_all, resolve_knobs
from bench.harness.measure import Measurement
from bench.harness.recorder import Recorder, ServerFacts
from bench.host import netns
from bench.host.procs import ProcessTable
from bench.host.venv import ensure_venv
from bench.load import Errors, Latency, LoadResult
from bench.load.oha import JSON_NAME, OhaParseError, parse_oha, run_oha, to_load_result
from bench.load.race import Race, RaceResult, gaps_around, probe_idle_close, run_race, within_budget
from bench.stack import namespace as nsstack
from bench.studies.schema import RACE_BURST, RACE_LOAD, RACE_ROUNDS, Arm, Study

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


def counter_deltas(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """COUNTERS' increase over the run (absent from this kernel: left out)."""
    return {k: after[k] - before.get(k, 0) for k in COUNTERS if k in after}


def run_spec(opts: plan.Options, trial: int = 1) -> plan.RunSpec:
    """An arm's run in a namespace, round `trial`: one route, one connection count, one
    rate."""
    scenario = opts.scenarios[0]
    rate = opts.rates[0] if opts.rates else None
    path = opts.study.paths.get(scenario)
    return plan.RunSpec(opts.servers[0], scenario, opts.concurrency[0], trial, path, rate)


def arm_knobs(spec: ServerSpec, opts: plan.Options) -> dict[str, int]:
    """The server's knobs on this machine with the arm's overrides."""
    return resolve_knobs(spec, len(os.sched_getaffinity(0)), opts.overrides)


def measure_arm(
    table: ProcessTable,
    spaces: netns.Namespaces,
    study: Study,
    arm: Arm,
    opts: plan.Options,
    run_dir: Path,
) -> ArmRun:
    """Namespace with the arm's sysctls, server, proxy, load; everything stopped after."""
    run_dir.mkdir(parents=True, exist_ok=True)
    spec = load_all()[arm.server]
    knobs = arm_knobs(spec, opts)
    python = ensure_venv(spec)
    out = ArmRun(knobs=knobs, backlog=knobs.get("backlog"))
    settings = study.settings(arm)
    sysctls = {k: str(v) for k, v in dict(settings.get("sysctls", {})).items()}  # type: ignore[call-overload]
    started = len(table.procs)
    with spaces.created(sysctls) as ns:
        try:
            _, out.argv = nsstack.start_server(table, ns, run_dir, spec, knobs, python)
            proxy = None
            if opts.proxy is not None:
                proxy = nsstack.start_proxy(
                    table,
                    ns,
                    run_dir,
                    opts.proxy,
                    bool(opts.upstream_keepalive),
                    opts.proxy_timeout_s,
                    spec.ready_path,
                )
            _load(table, ns, proxy, (arm, settings, opts), run_dir, out)
        finally:
            # The namespace disappears only when nothing of ours runs in it any more.
            for proc in list(table.procs[started:]):
                table.stop(proc)
    return out


def _load(
    table: ProcessTable,
    ns: netns.Namespace,
    proxy: nsstack.NsProxy | None,
    what: tuple[Arm, dict[str, object], plan.Options],
    run_dir: Path,
    out: ArmRun,
) -> None:
    """The arm's load inside the namespace, its socket peaks and counter deltas around it,
    and nginx's view of it (into `out`)."""
    arm, settings, opts = what
    run = run_spec(opts)
    port = nsstack.SERVER_PORT if proxy is None else nsstack.PROXY_PORT
    url = f"http://127.0.0.1:{port}{run.path}"
    mark = proxy.error_log.stat().st_size if proxy and proxy.error_log.exists() else 0
    sampler = nsstack.SocketSampler(ns)
    before = ns.netstat()
    since = time.time()
    sampler.start()
    try:
        if arm.load == RACE_LOAD:
            _race(ns, url, run.path, settings, out)
        else:
            out.oha_json = run_oha(
                table,
                ns,
                run_dir / arm.id,
                url,
                float(run.rate or 0),
                run.concurrency,
                opts.duration_s,
                opts.study.load_timeout_s,
                opts.keepalive,
            )
    finally:
        sampler.stop()
    until = time.time()
    counters = counter_deltas(before, ns.netstat())
    reasons: dict[str, int] = {}
    if proxy is not None:
        time.sleep(0.2)  # nginx writes a line when a request ends
        reasons = parse_proxy_errors(_read_from(proxy.error_log, mark))
        out.proxy_statuses = parse_proxy_log(_read_from(proxy.access_log, 0), since, until + 1)
    out.network = {
        "namespace": ns.name,
        "sysctls": dict(ns.sysctls),
        "kernel_counters": counters,
        "time_wait_max": sampler.time_wait_max,
        "listen_queue_max": sampler.listen_queue_max,
        "proxy_error_reasons": reasons,
    }


def _race(
    ns: netns.Namespace, url: str, path: str, settings: dict[str, object], out: ArmRun
) -> None:
    """The keep-alive race: the server's idle close probed first (probe_limit), gaps set
    around it (race_offsets_ms) or as written (race_gaps_ms), cut to race_budget."""
    gaps = [int(g) for g in settings.get("race_gaps_ms") or []]  # type: ignore[attr-defined]
    probe_limit = int(settings.get("probe_limit", 0))  # type: ignore[call-overload]
    if probe_limit:
        out.idle_close_s = probe_idle_close(ns, nsstack.SERVER_PORT, path, probe_limit)
        offsets = [int(o) for o in settings.get("race_offsets_ms") or []]  # type: ignore[attr-defined]
        if offsets and out.idle_close_s:
            gaps = gaps_around(out.idle_close_s, offsets)
    # Kept open the whole probe (past the balancer's idle timeout), or never kept open: no
    # gap can race; the record says which.
    rounds = int(settings.get("race_rounds", RACE_ROUNDS)) if gaps else 0  # type: ignore[call-overload]
    budget = settings.get("race_budget")
    if budget is not None:
        close = out.idle_close_s
        close_ms = round(close * 1000) if close else None
        gaps, rounds = within_budget(gaps, rounds, float(budget), close_ms)  # type: ignore[arg-type]
    burst = int(settings.get("race_burst", RACE_BURST))  # type: ignore[call-overload]
    out.race = run_race(ns, url, gaps, burst, rounds)


def _read_from(path: Path, mark: int) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(mark)
            return fh.read().decode(errors="replace")
    except OSError:
        return ""


def facts_of(spec: ServerSpec, opts: plan.Options, measured: ArmRun | None) -> ServerFacts:
    """What the arm's record says about the server: knobs, argv, backlog."""
    knobs = (measured.knobs if measured else None) or arm_knobs(spec, opts)
    meta: dict[str, object] = {"argv": measured.argv} if measured and measured.argv else {}
    return ServerFacts(spec.app, knobs, meta, None, knobs.get("backlog"))


def race_result(race: RaceResult) -> LoadResult:
    """The race in the record's units: every answer by status, client errors as `other`."""
    errors = Errors(
        non_2xx=sum(v for k, v in race.by_status.items() if not 200 <= k < 300),
        by_status=dict(race.by_status),
        other=sum(race.errors.values()),
        by_message=dict(race.errors),
    )
    raw: dict[str, str | bytes] = {
        Race.raw_name: json.dumps(race.to_dict(), sort_keys=True, indent=1)
    }
    rps = race.requests / race.duration_s if race.duration_s > 0 else 0.0
    return LoadResult(race.requests, race.duration_s, rps, Latency(), errors, raw)


def _network_fields(measured: ArmRun, settings: dict[str, object]) -> dict[str, object]:
    """The record keys only a namespace run has: `network` (with the race's pattern and the
    probe) and the socket figures read inside the namespace."""
    network = dict(measured.network or {})
    if measured.race is not None:
        probe = {
            "probe_limit_s": settings.get("probe_limit"),
            "idle_close_s": measured.idle_close_s,
        }
        network["race"] = {**measured.race.summary(), **probe}
    kernel = network.get("kernel_counters") or {}
    sockets = {
        "time_wait_max": network.get("time_wait_max"),
        "listen_queue_max": network.get("listen_queue_max"),
        "listen_overflows": kernel.get("TcpExtListenOverflows"),
        "listen_drops": kernel.get("TcpExtListenDrops"),
    }
    return {"network": network, "sockets": sockets}


def record_arm(
    recorder: Recorder,
    study: Study,
    arm: Arm,
    opts: plan.Options,
    measured: ArmRun,
    when: tuple[str, int],
) -> Path | None:
    """The record of an arm's round (`when`: its start and round number) through the
    Recorder: ok with what it measured, or failed when oha's output cannot be read (kept
    beside the record)."""
    started, trial = when
    spec = load_all()[arm.server]
    run = run_spec(opts, trial)
    facts = facts_of(spec, opts, measured)
    fields = _network_fields(measured, study.settings(arm))
    if measured.race is not None:
        # The race has no asked duration: its gaps and rounds took this long.
        result = race_result(measured.race)
        fields |= {"load_tool": RACE_LOAD, "duration_s": result.duration_s}
    else:
        text = measured.oha_json or ""
        try:
            parsed = parse_oha(text, offered_rps=float(run.rate or 0))
        except OhaParseError as exc:
            reason = f"unreadable oha output: {exc}"
            recorder.failed(opts, (run,), facts, reason, {JSON_NAME: text})
            return None
        rate = float(run.rate or 0)
        result = to_load_result(parsed, rate, opts.duration_s, {JSON_NAME: text})
    measurement = Measurement(result, started, proxy_by_status=measured.proxy_statuses)
    return recorder.in_namespace(opts, run, facts, measurement, fields)
