"""The summary's "Production behaviours" section: per catalog server, what operating it costs.

Input: every record (those of LIFECYCLE=reload runs, of the cpu-quota study, of soaks and of
worker-recycling runs are the ones used). Output: markdown lines, one row per catalog server,
each cell a measured figure, "not supported by the server" (with the declaration's reason),
or "not measured" with the command that measures it — never blank.

- reload: the latest LIFECYCLE=reload record per server: requests failed (the load tool's
  failed count over the whole window), the time until the offered rate was served again and
  the p99 within 2 s of the signal.
- CPU quota: two CPU_QUOTA= records (record.cgroup) of one study run on /db whose worker rule
  (metadata.workers_rule) is `cpus` (the server's rule: workers = the CPUs os.cpu_count()
  sees) and `quota` (the same rule counted from the quota): the change in req/s and p99 when
  the rule ignores the quota.
- recycling: a RECYCLE= record (record.recycles: the server's own max-requests setting) and
  the same study run's steady record of the server and scenario (no recycles, lifecycle or
  cgroup): failed requests, workers started and p99.

Records are found by what they carry, never by study or arm names; "not supported" by
metadata.unsupported (record.unsupported_code, which reads records older than format 6 too).
- memory slope: the latest soak (make soak) of the server: MB/hour with its 95 % interval.
"""

from __future__ import annotations

from bench.core.outcome import Outcome
from bench.core.record import Record, unsupported_code
from bench.core.registry import load_all
from bench.report.soak import slope_text, soak_records
from bench.report.table import markdown_table

NOT_CATALOG = ("nginx-static",)  # the ceiling baseline, not a Python server
# The study that measures each column (studies/<name>.toml), for the "not measured" hint.
QUOTA_STUDY = "cpu-quota"
RECYCLE_STUDY = "recycle"
RELOAD_STUDY = "reload"
# metadata.workers_rule of the two quota records: the CPUs os.cpu_count() sees, the quota's.
RULE_CPUS, RULE_QUOTA = "cpus", "quota"


def quota_bound(rec: Record) -> bool | None:
    """Whether a CPU quota bound in this record's window: the kernel throttled the server's
    cgroup for some time (cgroup.throttled_ms > 0); None: no quota or no cpu.stat figures."""
    quota = rec.cgroup or {}
    if "throttled_ms" not in quota:
        return None
    return float(quota["throttled_ms"] or 0) > 0


def _latest(records: list[Record]) -> Record | None:
    return max(records, key=lambda r: str(r.metadata.get("started_at", ""))) if records else None


def reload_cell(server: str, records: list[Record], why: str | None) -> str:
    """Requests failed on reload, recovery and p99 around it; or why there is none."""
    mine = [
        r
        for r in records
        if r.server == server and (r.lifecycle is not None or unsupported_code(r) == "reload")
    ]
    rec = _latest(mine)
    if rec is None:
        if why is not None:
            return f"not supported by the server ({why})"
        return f"not measured (make study NAME={RELOAD_STUDY})"
    if rec.status == "unsupported":
        return "not supported by the server" + (f" ({why})" if why else "")
    life = rec.lifecycle or {}
    if rec.status == "failed":
        return f"failed: {rec.reason}"
    if "failed" not in life:
        return f"not measured ({life.get('error', rec.reason or 'run failed')})"
    recovery = life.get("recovery_s")
    recovered = "not recovered in the window" if recovery is None else f"recovered in {recovery} s"
    around = life.get("p99_around_ms")
    p99 = f", p99 ±2 s {around:.0f} ms" if isinstance(around, (int, float)) else ""
    rate = f" at {rec.offered_rps:g} req/s" if rec.offered_rps else ""
    return f"{life['failed']} failed{rate}, {recovered}{p99}"


def _quota_pair(records: list[Record], server: str) -> tuple[Record, Record] | None:
    """The latest study run's (rule, quota) records of the server on /db."""
    found: dict[object, dict[str, Record]] = {}
    for rec in sorted(records, key=lambda r: str(r.metadata.get("started_at", ""))):
        rule = rec.metadata.get("workers_rule")
        if (
            rec.server == server
            and rec.cgroup is not None
            and rec.status == "ok"
            and rec.scenario == "db"
            and rule in (RULE_CPUS, RULE_QUOTA)
        ):
            found.setdefault(rec.metadata.get("study_run"), {})[str(rule)] = rec
    pairs = [(p[RULE_CPUS], p[RULE_QUOTA]) for p in found.values() if len(p) == 2]
    return max(pairs, key=lambda p: str(p[1].metadata.get("started_at", ""))) if pairs else None


def quota_cell(server: str, records: list[Record], has_workers: bool) -> str:
    """req/s and p99 of the os.cpu_count() rule relative to the quota's, under a 1-CPU quota."""
    if not has_workers:
        return "not supported by the server (one process: no worker rule)"
    pair = _quota_pair(records, server)
    if pair is None or not pair[0].rps or not pair[1].rps:
        return f"not measured (make study NAME={QUOTA_STUDY})"
    rule, fix = pair
    change = 100 * (rule.rps / fix.rps - 1)
    p99_rule = (rule.latency_ms or {}).get("p99")
    p99_fix = (fix.latency_ms or {}).get("p99")
    throttled = (rule.cgroup or {}).get("throttled_ms")
    text = (
        f"req/s {change:+.0f} % (w{rule.knobs.get('workers')} {rule.rps:,.0f} vs "
        f"w{fix.knobs.get('workers')} {fix.rps:,.0f})"
    )
    if p99_rule is not None and p99_fix is not None:
        text += f", p99 {p99_rule:.0f} vs {p99_fix:.0f} ms"
    if throttled is not None:
        text += f", throttled {throttled / 1000:.1f} s"
    return text


def _failed(rec: Record) -> int:
    return Outcome.of_record(rec).unserved


def _steady(rec: Record) -> bool:
    return rec.recycles is None and rec.lifecycle is None and rec.cgroup is None


def _recycle_pair(records: list[Record], server: str) -> tuple[Record | None, Record | None]:
    """The server's latest recycling record (or its "not supported"), and the steady record
    of the same study run and scenario to compare it with."""
    on = _latest(
        [
            r
            for r in records
            if r.server == server and (r.recycles is not None or unsupported_code(r) == "recycle")
        ]
    )
    if on is None or on.metadata.get("study_run") is None:
        return on, None
    off = _latest(
        [
            r
            for r in records
            if r.server == server
            and r.scenario == on.scenario
            and r.metadata.get("study_run") == on.metadata.get("study_run")
            and r.status != "unsupported"
            and _steady(r)
        ]
    )
    return on, off


def recycle_cell(server: str, records: list[Record], why: str | None) -> str:
    """Failed requests and p99 with the server's own recycling against the same run without
    (study recycle); or why there is none."""
    on, off = _recycle_pair(records, server)
    if why is not None or (on is not None and on.status == "unsupported"):
        return f"not supported by the server ({why or (on.reason if on else '')})"
    if on is not None and on.status == "failed":
        return f"failed with recycling: {on.reason}"
    if on is None or off is None or on.status != "ok" or off.status != "ok":
        return f"not measured (make study NAME={RECYCLE_STUDY})"
    started = (on.recycles or {}).get("workers_started", 0)
    p99_on = (on.latency_ms or {}).get("p99")
    p99_off = (off.latency_ms or {}).get("p99")
    p99 = f", p99 {p99_on:.0f} vs {p99_off:.0f} ms" if p99_on and p99_off else ""
    return f"{_failed(on)} failed vs {_failed(off)} without ({started} workers started){p99}"


def memory_cell(server: str, records: list[Record]) -> str:
    """The RSS slope of the server's latest soak, with its interval and length."""
    rec = soak_records(records).get(server)
    if rec is None:
        return f"not measured (make soak SERVER={server})"
    return f"{slope_text(rec)} over {rec.duration_s:g} s at {rec.offered_rps:g} req/s"


def production_sections(records: list[Record]) -> list[str]:
    """The section, when any record of a production behaviour exists."""
    relevant = [
        r
        for r in records
        if r.lifecycle is not None
        or r.cgroup is not None
        or r.series is not None
        or r.recycles is not None
        or unsupported_code(r) in ("reload", "recycle")
    ]
    if not relevant:
        return []
    specs = load_all()
    rows = []
    for server, spec in sorted(specs.items()):
        if server in NOT_CATALOG:
            continue
        why = spec.reload_why if spec.reload_signal is None else None
        rows.append(
            [
                server,
                reload_cell(server, records, why),
                recycle_cell(
                    server, records, spec.recycle_why if spec.recycle_argv is None else None
                ),
                quota_cell(server, records, "workers" in spec.knobs),
                memory_cell(server, records),
            ]
        )
    header = [
        "server",
        "graceful reload under load",
        "worker recycling",
        "CPU-quota penalty of the default worker rule (1 CPU, /db)",
        "memory slope",
    ]
    return [
        "## Production behaviours",
        "",
        "Reload: the server's own reload signal (servers/<id>/server.toml [reload]) in the "
        "middle of an open-loop window (oha); failed = every request without a 2xx answer in "
        "the window, recovered = until the offered rate is served again (2xx within 3 × the "
        "p99 before the signal, at least +100 ms). CPU quota: the server's rule (workers = "
        "the CPUs os.cpu_count() sees) against the same rule counted from a 1-CPU cgroup "
        "quota, study cpu-quota; + means the rule that ignores the quota served more.",
        "",
        *markdown_table(header, rows, "lllll"),
        "",
    ]
