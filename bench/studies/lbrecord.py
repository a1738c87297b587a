"""One load-balancer study arm's measurement -> a Record (and its raw files).

Input: the study, the arm, what measure_arm gave (ArmRun) or the reason it failed. Output: a
Record with metadata.study, `network` (namespace facts) and the load's figures in the
record's usual keys, and the raw outputs to keep beside it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from bench.core import record
from bench.core.registry import load_all
from bench.host.arch import host_arch
from bench.host.metadata import now_iso
from bench.host.venv import tool_version
from bench.load.oha import JSON_NAME, Oha, OhaParseError, parse_oha, to_load_result
from bench.load.race import Race, RaceResult
from bench.stack import namespace as nsstack
from bench.studies.lbfile import LbArm, LbStudy, is_race


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


def to_record(
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
        raw[JSON_NAME] = measured.oha_json
        try:
            parsed = parse_oha(measured.oha_json, offered_rps=rate)
            requests, duration = parsed.responses, parsed.duration_s
            rps = parsed.responses / duration if duration > 0 else 0.0
            achieved, latency = parsed.achieved_rps, parsed.latency_ms
            # unsent and aborted as every oha run counts them (bench.load.oha.to_load_result)
            duration_s = float(arm.get("duration", 5))
            errors = to_load_result(parsed, float(rate or 0), duration_s, {}).errors.to_dict()
        except OhaParseError as exc:
            status, reason = "failed", f"unreadable {Oha.name} output: {exc}"
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
        raw[Race.raw_name] = json.dumps(race.to_dict(), sort_keys=True, indent=1)
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
        load_tool=Oha.name if rate is not None else Race.name,
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
