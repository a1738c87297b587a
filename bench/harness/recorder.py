"""The one place where a measurement or a failure becomes a Record on disk.

Input: the run-level facts (host, placement, load tool, emulator), per block the facts about
the server (ServerFacts), per run a Measurement or a reason. Output: records written through
bench.core.record (atomic, never overwritten), a progress line per run, and the count of failed
runs (the exit status's source).
"""

from __future__ import annotations

import dataclasses
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from bench.core import plan, record
from bench.core.progress import Progress
from bench.core.protocol import PROTOCOLS
from bench.core.registry import FRAMEWORKS, RAW
from bench.core.scenario import SCENARIOS
from bench.harness.measure import Measurement
from bench.host import speed
from bench.host.arch import Emulator, host_arch
from bench.host.metadata import new_start_id, now_iso
from bench.host.placement import Placement
from bench.load import LoadResult, LoadTool


@dataclass
class ServerFacts:
    """What every record of one server start says about the server."""

    app: str = "wsgi"
    knobs: dict[str, int] = field(default_factory=dict)
    meta: dict[str, object] = field(default_factory=dict)
    verification: dict | None = None
    backlog: int | None = None
    container: dict[str, object] | None = None  # RUNTIME=docker: image, limits, network
    # one per server start: a block's records share it (record format 10)
    start_id: str = field(default_factory=new_start_id)
    # /interpreter read inside the server right after its verification (format 14)
    interpreter: dict | None = None


@dataclass
class Recorder:
    """Writes the records of one harness invocation."""

    host: dict[str, object]
    placement: Placement
    tool: LoadTool
    progress: Progress
    proxy_version: str | None = None
    emulator: Emulator | None = None
    failures: int = 0
    written: list[Path] = field(default_factory=list)
    # this invocation's records, in the order written: TRIALS=auto's stopping rule reads them
    records: list[record.Record] = field(default_factory=list)

    def _metadata(
        self,
        opts: plan.Options,
        facts: ServerFacts,
        measured: Measurement | None,
        meta: dict | None = None,
    ) -> dict[str, object]:
        return {
            **(meta or {}),
            **self.host,
            **facts.meta,
            "start_id": facts.start_id,
            "started_at": measured.started if measured else now_iso(),
            "ended_at": now_iso(),
            "seed": opts.seed,
            **({"trials_auto": opts.precision.to_dict()} if opts.precision else {}),
            "cpu_placement": self.placement.to_dict(),
            "runtime": opts.mode.runtime,
            **opts.study.meta,
            **({"proxy_version": self.proxy_version} if opts.proxy else {}),
            **({"emulator": self.emulator.metadata()} if self.emulator else {}),
            # the session's start probe and the latest before this record (format 17)
            "speed": speed.record_field(),
        }

    def _measured_fields(self, measured: Measurement | None) -> dict[str, object]:
        """The record's keys that come from the measurement (all None without one)."""
        if measured is None:
            keys = ("requests", "rps", "latency_ms", "errors", "db", "tasks", "achieved_rps")
            return dict.fromkeys((*keys, "websocket"))
        result = measured.result
        resources = measured.resources.to_dict() if measured.resources else None
        if resources and self.emulator is not None:
            # Under qemu the tree's memory is the emulator's, not the server's: kept apart.
            resources |= {"server_rss_mb": None, "qemu_rss_mb": resources["server_rss_mb"]}
            resources["server_rss_start_mb"] = None
        errors = result.errors.to_dict()
        if measured.proxy_by_status is not None:
            errors["proxy_by_status"] = {
                str(k): v for k, v in sorted(measured.proxy_by_status.items())
            }
        return {
            "requests": result.requests,
            "rps": result.rps,
            "latency_ms": result.latency.to_dict(),
            "errors": errors,
            "db": measured.db.to_dict() if measured.db else None,
            "resources": resources,
            "sockets": measured.sockets.to_dict() if measured.sockets else None,
            "tasks": result.tasks,
            "achieved_rps": result.achieved_rps,
            "websocket": websocket_figures(result),
            "lifecycle": measured.lifecycle,
            "series": measured.series,
            "recycles": measured.recycles,
            **(measured.foreign.to_fields() if measured.foreign is not None else {}),
        }

    def _cgroup(
        self, opts: plan.Options, facts: ServerFacts, measured: Measurement | None
    ) -> dict[str, object] | None:
        """The record's cgroup (CPU_QUOTA=): the window's throttling and the workers the
        server's rule chose, with the rule and the CPUs it saw (os.cpu_count()'s trap: the
        quota is not among them)."""
        if opts.cpu_quota is None:
            return None
        rule = opts.study.meta.get("workers_rule") or (
            f"WORKERS={opts.overrides['workers']}" if "workers" in opts.overrides else "server.toml"
        )
        window = (measured.cgroup if measured else None) or {"cpu_quota": opts.cpu_quota}
        return {
            **window,
            "workers": facts.knobs.get("workers"),
            "workers_rule": rule,
            "cpus_seen": len(self.placement.server_cpus),
        }

    def _write(
        self,
        opts: plan.Options,
        run: plan.RunSpec,
        facts: ServerFacts,
        status: str,
        reason: str | None,
        raw: dict[str, str | bytes],
        measured: Measurement | None = None,
        meta: dict | None = None,
        fields: dict[str, object] | None = None,
    ) -> Path:
        settings = self.tool.settings(run.concurrency)
        rec = record.Record(
            format_version=record.FORMAT_VERSION,
            status=status,
            reason=reason,
            run_id=uuid.uuid4().hex,
            server=run.server,
            app=facts.app,
            app_framework=(
                opts.app.identity(facts.app)["framework"]
                if opts.app is not None
                else None
                if opts.app_flavor == RAW
                else FRAMEWORKS.get(facts.app)
            ),
            app_flavor=opts.app_flavor,
            scenario=run.scenario,
            path=run.path,
            concurrency=run.concurrency,
            trial=run.trial,
            duration_s=float(opts.duration_s),
            arch=opts.arch,
            host_arch=host_arch(),
            emulated=opts.arch != host_arch(),
            load_tool=self.tool.name,
            load_tool_version=self.tool.version,
            load_threads=settings["load_threads"],
            load_workers=settings["load_workers"],
            knobs=facts.knobs,
            verify=facts.verification,
            metadata=self._metadata(opts, facts, measured, _sliced(meta, run)),
            raw_files=[],
            proxy=opts.proxy,
            keepalive={"client": opts.keepalive, "upstream": opts.upstream_keepalive},
            **_protocol(opts, run),  # type: ignore[arg-type]
            backlog=facts.backlog,
            target=opts.target,
            offered_rps=float(run.rate) if run.rate is not None else _offered(measured),
            user_app=opts.app.identity(facts.app) if opts.app is not None else None,
            interpreter=_interpreter(opts, facts, measured),
            **self._measured_fields(measured),  # type: ignore[arg-type]
        )
        rec = dataclasses.replace(rec, cgroup=self._cgroup(opts, facts, measured), **(fields or {}))
        rec = _with_asked(rec, opts, facts, measured, status)
        if status == "failed":  # unsupported is a fact about the server, not a failed run
            self.failures += 1
        path = record.write_record(opts.results, rec, raw)
        self.written.append(path)
        self.records.append(rec)
        self.progress.done += 1
        return path

    def measured(
        self,
        opts: plan.Options,
        run: plan.RunSpec,
        facts: ServerFacts,
        measured: Measurement,
        meta: dict | None = None,
    ) -> Path:
        """A measured run: ok, or failed when it measured nothing (no request completed; an
        idle WebSocket run: no connection held)."""
        result = measured.result
        reason = result.empty_reason()
        status = "ok" if reason is None else "failed"
        path = self._write(opts, run, facts, status, reason, result.raw, measured, meta)
        if result.latency.p99 is not None:
            print(
                f"        {result.rps:>10,.0f} rps  p50 {result.latency.p50:.2f} ms  "
                f"p99 {result.latency.p99:.2f} ms  -> {path.name}",
                file=sys.stderr,
                flush=True,
            )
        return path

    def in_namespace(
        self,
        opts: plan.Options,
        run: plan.RunSpec,
        facts: ServerFacts,
        measured: Measurement,
        fields: dict[str, object],
    ) -> Path:
        """A run measured in a network namespace of its own (bench.studies.namespace): ok
        whatever it counted (a race that found no idle connection to lose is a finding),
        with the record keys only such a run has in `fields` (network, its sockets, the race
        as its load)."""
        raw = measured.result.raw
        return self._write(opts, run, facts, "ok", None, raw, measured, fields=fields)

    def failed(
        self,
        opts: plan.Options,
        runs: tuple[plan.RunSpec, ...],
        facts: ServerFacts,
        reason: str,
        logs: dict[str, str | bytes],
        *,
        quiet: bool = False,
        meta: dict | None = None,
    ) -> None:
        """A failed record for each run that could not be measured, with the logs that say
        why."""
        for run in runs:
            self._write(opts, run, facts, "failed", reason, logs, meta=meta)
        if runs and not quiet:
            print(f"  FAILED {runs[0].server}: {reason}", file=sys.stderr, flush=True)

    def unsupported(
        self,
        opts: plan.Options,
        runs: tuple[plan.RunSpec, ...],
        facts: ServerFacts,
        reason: str,
        code: str,
    ) -> None:
        """An unsupported record for each run: a fact about the server, not a failure; `code`
        (record.UNSUPPORTED) says what it lacks, in metadata.unsupported."""
        for run in runs:
            meta = {"unsupported": code}
            self._write(opts, run, facts, "unsupported", reason, {}, meta=meta)


def _interpreter(
    opts: plan.Options, facts: ServerFacts, measured: Measurement | None
) -> dict | None:
    """The record's interpreter (format 14): PYTHON= and /interpreter as the server answered
    after its verification and after the measured window."""
    after = measured.interpreter if measured is not None else None
    return record.interpreter_fields(opts.python, facts.interpreter, after)


def _sliced(meta: dict | None, run: plan.RunSpec) -> dict | None:
    """A race slice's record names its pass (metadata.slice, bench.harness.slices)."""
    return {**(meta or {}), "slice": run.slice} if run.slice else meta


def _with_asked(
    rec: record.Record,
    opts: plan.Options,
    facts: ServerFacts,
    measured: Measurement | None,
    status: str,
) -> record.Record:
    """The container's facts and window; and, for a run that failed before it was measured,
    what was asked of it, so that the summary says "failed", not "not measured"."""
    if facts.container is not None:
        window = (measured.container if measured else None) or {}
        rec = dataclasses.replace(rec, container={**facts.container, **window})
    if measured is None and status == "failed":
        if opts.lifecycle:
            rec = dataclasses.replace(rec, lifecycle={"event": opts.lifecycle})
        if "max_requests" in facts.knobs:
            rec = dataclasses.replace(rec, recycles={"max_requests": facts.knobs["max_requests"]})
    return rec


def _protocol(opts: plan.Options, run: plan.RunSpec) -> dict[str, object]:
    """The record's protocol, tls and streams (format 11): the scenario's own protocol when it
    carries one (websocket, format 13), else PROTOCOL=."""
    carried = SCENARIOS[run.scenario].protocol if run.scenario in SCENARIOS else None
    if carried is not None:
        return {"protocol": carried, "tls": False, "streams": 1}
    return {"protocol": opts.protocol, "tls": PROTOCOLS[opts.protocol].tls, "streams": opts.streams}


def _offered(measured: Measurement | None) -> float | None:
    """A WebSocket run's messages/s offered on its fixed schedule (connections x each one's
    rate): paced like an open-loop tool's arrivals; None for every other closed-loop run, an
    idle WebSocket run among them (no message is offered: it holds connections)."""
    figures = measured.result.websocket if measured is not None else None
    offered = figures.get("offered_messages_per_s") if figures else None
    return float(offered) if offered else None


def websocket_figures(result: LoadResult) -> dict | None:
    """The record's `websocket` (format 13): the load tool's WebSocket figures (the server's
    memory per 1,000 connections is the report's: its RSS against connections held over the
    concurrencies, bench.report.websocket)."""
    if result.websocket is None:
        return None
    return dict(result.websocket)
