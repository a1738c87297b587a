"""The summary's "Production behaviours" section: per catalog server, what operating it costs.

Input: every record (those of LIFECYCLE=reload runs, of the cpu-quota study, of soaks and of
worker-recycling runs are the ones used). Output: markdown lines, one row per catalog server,
each cell a measured figure, "not supported by the server" (with the declaration's reason),
or "not measured" with the command that measures it — never blank.

- reload: the latest LIFECYCLE=reload record per server: requests failed (the load tool's
  failed count over the whole window), arrivals answered late (lifecycle.late_arrivals, past
  its latency_limit_ms; "late not recorded" before format 16), the time until the offered
  rate was served again and the p99 within 2 s of the signal; other reload runs of the server
  that failed are said beside it.
- CPU quota: CPU_QUOTA= records (record.cgroup) on /db of two worker rules, `cpus` (the
  server's rule: workers = the CPUs os.cpu_count() sees) and `quota` (the same rule counted
  from the quota), each rule's trials from one study run (metadata.workers_rule) or from plain
  `make bench` runs of one machine at one quota (cgroup.workers equal to cgroup.cpus_seen, or
  to the quota rounded up): the change in req/s (with its interval over trials) and p99
  when the rule ignores the quota, and the throttling of each — only where the quota bound
  (throttled time > 0 in some trial); "quota did not bind" otherwise.
- recycling: a RECYCLE= record (record.recycles: the server's own max-requests setting) and
  the steady record (no recycles, lifecycle or cgroup) of the same study run and scenario, or
  for a plain run the latest plain one of the same machine, scenario and offered rate:
  failed and late requests (recycles.late_arrivals), workers started and p99.

- container limits: records with a `container` and a metadata.workers_rule (the
  container-limits study): per set of limits, the rule the study's checks of that pair favour
  (bench.report.limits, the verdicts given as `checks`), or why they do not decide.

Records are found by what they carry, never by study or arm names; "not supported" by
metadata.unsupported (record.unsupported_code, which reads records older than format 6 too).
- memory slope: the latest soak (make soak) of the server: MB/hour with its 95 % interval.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable

from bench.core.defaults import LATE_LIMIT_MS, QUOTA_CPUS
from bench.core.outcome import Outcome
from bench.core.record import Record, unsupported_code
from bench.core.registry import ServerSpec, load_all
from bench.report.limits import RUN as LIMITS_RUN
from bench.report.limits import Checks, advice
from bench.report.soak import later_slope_text, slope_text, soak_records
from bench.report.stats import difference
from bench.report.table import markdown_table

NOT_CATALOG = ("nginx-static",)  # the ceiling baseline, not a Python server
# The "not measured" hints are plain `make bench` commands for that server (a study declares
# its arms per server: a new server has none); the window the reload and recycle studies use.
RELOAD_RUN = "LOAD=oha RATE=300 SCENARIO=db DURATION=20"
# metadata.workers_rule of the two quota records: the CPUs os.cpu_count() sees, the quota's.
RULE_CPUS, RULE_QUOTA = "cpus", "quota"


def quota_bound(rec: Record) -> bool | None:
    """Whether a CPU quota bound in this record's window: the kernel throttled the server's
    cgroup for some time (cgroup.throttled_ms > 0, or the container's under a CPU limit);
    None: no quota or no cpu.stat figures."""
    quota = rec.cgroup or {}
    if "throttled_ms" not in quota:
        quota = rec.container or {}
        if quota.get("quota_us") is None or quota.get("throttled_ms") is None:
            return None
    return float(quota["throttled_ms"] or 0) > 0


def _latest(records: list[Record]) -> Record | None:
    return max(records, key=lambda r: str(r.metadata.get("started_at", ""))) if records else None


def late_text(found: dict) -> str:
    """A reload's or a recycling run's late arrivals (record.lifecycle or record.recycles):
    "M late (past X ms)"; "late not recorded" for a record before format 16."""
    late, limit = found.get("late_arrivals"), found.get("latency_limit_ms")
    if late is None or limit is None:
        return "late not recorded"
    return f"{int(late):,} late (past {float(limit):,.0f} ms)"


def _failed_beside(rec: Record, mine: list[Record]) -> str:
    """The other runs of the same kind that failed, said beside the one shown: one reading
    per server (uwsgi's study reload failed while a later run measured 15 failed)."""
    failed = [r for r in mine if r is not rec and r.status == "failed"]
    if not failed:
        return ""
    latest = _latest(failed)
    reason = latest.reason if latest is not None else ""
    return f"; {len(failed)} other such run(s) failed, the latest: {reason}"


def reload_cell(server: str, records: list[Record], why: str | None) -> str:
    """Requests failed and answered late on reload, recovery and p99 around it; or why there
    is none."""
    mine = [
        r
        for r in records
        if r.server == server and (r.lifecycle is not None or unsupported_code(r) == "reload")
    ]
    rec = _latest(mine)
    if rec is None:
        if why is not None:
            return f"not supported by the server ({why})"
        return f"not measured (make bench SERVER={server} {RELOAD_RUN} LIFECYCLE=reload)"
    if rec.status == "unsupported":
        return "not supported by the server" + (f" ({why})" if why else "")
    life = rec.lifecycle or {}
    if rec.status == "failed":
        return f"failed: {rec.reason}"
    if "failed" not in life:
        return f"not measured ({life.get('error', rec.reason or 'run failed')})"
    recovery = life.get("recovery_s")
    limit = life.get("latency_limit_ms")
    before = life.get("p99_before_ms")
    if recovery is None and limit and isinstance(before, (int, float)) and before > limit:
        recovered = (
            f"recovery not judged (p99 before the signal {before:,.0f} ms, already past "
            f"{limit:,.0f} ms)"
        )
    elif recovery is None:
        recovered = "not recovered in the window"
    else:
        recovered = f"recovered in {recovery} s"
    disrupted = life.get("disrupted_s")
    if disrupted and limit and life.get("late_arrivals") is None:
        # before format 16 the late arrivals are not a figure: the time they took is
        recovered += f" ({disrupted:.1f} s with arrivals late past {limit:,.0f} ms or failed)"
    around = life.get("p99_around_ms")
    p99 = f", p99 ±2 s {around:,.0f} ms" if isinstance(around, (int, float)) else ""
    rate = f" at {rec.offered_rps:g} req/s" if rec.offered_rps else ""
    return (
        f"{int(life['failed']):,} failed, {late_text(life)}{rate}, {recovered}{p99}"
        + _failed_beside(rec, mine)
    )


def _rule_of(rec: Record) -> str | None:
    """Which of the two rules a quota record ran: a study arm's metadata.workers_rule, or for
    a plain `make bench CPU_QUOTA=` run its workers against what it saw (cgroup): as many as
    the CPUs it saw is the os.cpu_count() rule, the quota rounded up is the quota's (where
    the two are equal there is no trap to measure)."""
    rule = rec.metadata.get("workers_rule")
    if rule is not None:
        return str(rule) if rule in (RULE_CPUS, RULE_QUOTA) else None
    cgroup = rec.cgroup or {}
    workers, seen, quota = cgroup.get("workers"), cgroup.get("cpus_seen"), cgroup.get("cpu_quota")
    if workers is None or seen is None or not quota or seen == math.ceil(float(quota)):
        return None
    if workers == seen:
        return RULE_CPUS
    return RULE_QUOTA if workers == math.ceil(float(quota)) else None


def _quota_pair(records: list[Record], server: str) -> tuple[list[Record], list[Record]] | None:
    """The latest comparison's trials of each rule on /db: one study run's, or plain `make
    bench` runs' of one machine, at one quota either way (a study run at 1.0 and at 0.5 CPU
    is two comparisons, never one pool)."""
    found: dict[object, dict[str, list[Record]]] = {}
    for rec in records:
        if rec.server != server or rec.cgroup is None or rec.status != "ok" or rec.scenario != "db":
            continue
        rule = _rule_of(rec)
        if rule is None:
            continue
        run = rec.metadata.get("study_run")
        key = (run, rec.metadata.get("machine_id"), rec.cgroup.get("cpu_quota"))
        found.setdefault(key, {}).setdefault(rule, []).append(rec)
    pairs = [(p[RULE_CPUS], p[RULE_QUOTA]) for p in found.values() if len(p) == 2]
    if not pairs:
        return None
    return max(pairs, key=lambda p: max(str(r.metadata.get("started_at", "")) for r in p[1]))


def _median(records: list[Record], value: Callable[[Record], float | None]) -> float | None:
    present = [v for v in (value(r) for r in records) if v is not None]
    return statistics.median(present) if present else None


def _throttled_ms(rec: Record) -> float | None:
    value = (rec.cgroup or {}).get("throttled_ms")
    return float(value) if value is not None else None


def _ms(value: float | None) -> str:
    """Throttled milliseconds: a sliver (0.01 ms) stays visible beside a plain 0."""
    value = value or 0.0
    return f"{value:,.0f}" if value >= 1 or value == 0 else f"{value:.2f}"


def _change_text(rule: list[Record], fix: list[Record]) -> tuple[str, str]:
    """req/s of the rule against the quota's: the change with its 95 % interval over trials,
    or why there is no interval."""
    diff = difference([r.rps for r in fix if r.rps], [r.rps for r in rule if r.rps])
    if diff.ratio is None:
        return "req/s –", ""
    text = f"req/s {100 * (diff.ratio - 1):+.0f} %"
    if diff.low is None or diff.high is None:
        return text, "; one trial: no interval"
    return text + f" [{100 * (diff.low - 1):+.0f}, {100 * (diff.high - 1):+.0f}]", ""


def quota_cell(
    server: str, records: list[Record], has_workers: bool, cpus_rule: bool = True
) -> str:
    """req/s and p99 of the os.cpu_count() rule relative to the quota's, with the throttling
    of each: shown only where the quota bound (throttled time > 0) in some trial."""
    if not has_workers:
        return "not supported by the server (one process: no worker rule)"
    pair = _quota_pair(records, server)
    if (
        pair is None
        or not _median(pair[0], lambda r: r.rps)
        or not _median(pair[1], lambda r: r.rps)
    ):
        # The server's own rule where it is workers = CPUs; else the CPUs named for it.
        first = "" if cpus_rule else " WORKERS=<the CPUs here>"
        return (
            f"not measured (make bench SERVER={server} SCENARIO=db CPU_QUOTA={QUOTA_CPUS:g}"
            f"{first}, then "
            "the same with WORKERS=1)"
        )
    rule, fix = pair
    quota = (fix[0].cgroup or {}).get("cpu_quota")
    at = f" at {float(quota):g} CPU" if quota is not None else ""
    workers = f"w{rule[0].knobs.get('workers')} vs w{fix[0].knobs.get('workers')}{at}"
    throttled = (
        f"throttled {_ms(_median(rule, _throttled_ms))} vs {_ms(_median(fix, _throttled_ms))} ms"
    )
    if not any(quota_bound(r) for r in [*rule, *fix]):
        return f"quota did not bind ({workers}: 0 ms throttled in every trial): no penalty shown"
    rps_rule, rps_fix = _median(rule, lambda r: r.rps), _median(fix, lambda r: r.rps)
    change, note = _change_text(rule, fix)
    text = f"{change} ({workers}: {rps_rule:,.0f} vs {rps_fix:,.0f}{note})"
    p99_rule = _median(rule, lambda r: (r.latency_ms or {}).get("p99"))
    p99_fix = _median(fix, lambda r: (r.latency_ms or {}).get("p99"))
    if p99_rule is not None and p99_fix is not None:
        text += f", p99 {p99_rule:,.0f} vs {p99_fix:,.0f} ms"
    return f"{text}, {throttled}"


def _failed(rec: Record) -> int:
    return Outcome.of_record(rec).unserved


def _steady(rec: Record) -> bool:
    return rec.recycles is None and rec.lifecycle is None and rec.cgroup is None


def _recycle_pair(records: list[Record], server: str) -> tuple[Record | None, Record | None]:
    """The server's latest recycling record (or its "not supported"), and the steady record
    to compare it with: of the same study run and scenario, or for a plain `make bench
    RECYCLE=` run the latest plain steady run of the same machine, scenario and offered rate."""
    on = _latest(
        [
            r
            for r in records
            if r.server == server and (r.recycles is not None or unsupported_code(r) == "recycle")
        ]
    )
    if on is None:
        return None, None
    run = on.metadata.get("study_run")
    off = _latest(
        [
            r
            for r in records
            if r.server == server
            and r.scenario == on.scenario
            and r.metadata.get("study_run") == run
            and (run is not None or _same_plain_point(r, on))
            and r.status != "unsupported"
            and _steady(r)
        ]
    )
    return on, off


def _same_plain_point(rec: Record, on: Record) -> bool:
    """A plain run at the same offered rate on the same machine as `on`."""
    return rec.offered_rps == on.offered_rps and rec.metadata.get("machine_id") == on.metadata.get(
        "machine_id"
    )


def recycle_cell(server: str, records: list[Record], why: str | None) -> str:
    """Failed requests and p99 with the server's own recycling against the same run without
    (study recycle); or why there is none."""
    on, off = _recycle_pair(records, server)
    if why is not None or (on is not None and on.status == "unsupported"):
        return f"not supported by the server ({why or (on.reason if on else '')})"
    if on is not None and on.status == "failed":
        return f"failed with recycling: {on.reason}"
    if on is None or off is None or on.status != "ok" or off.status != "ok":
        return (
            f"not measured (make bench SERVER={server} {RELOAD_RUN} RECYCLE=1000, then the "
            "same without RECYCLE)"
        )
    started = (on.recycles or {}).get("workers_started", 0)
    if not started:
        # no worker was replaced in the window: the run measured the server without
        # recycling, twice (meinheld's 0 workers started was tabled as measured)
        return (
            "not measured: no worker was recycled in the window (0 started; make bench "
            f"SERVER={server} {RELOAD_RUN} RECYCLE= below the requests a worker serves in it)"
        )
    p99_on = (on.latency_ms or {}).get("p99")
    p99_off = (off.latency_ms or {}).get("p99")
    p99 = f", p99 {p99_on:,.0f} vs {p99_off:,.0f} ms" if p99_on and p99_off else ""
    workers = f"{int(started):,} workers started"
    late = late_text(on.recycles or {})
    return f"{_failed(on):,} failed, {late} vs {_failed(off):,} failed without ({workers}){p99}"


def memory_cell(server: str, records: list[Record]) -> str:
    """The RSS slope of the server's latest soak, with its interval and length."""
    rec = soak_records(records).get(server)
    if rec is None:
        return f"not measured (make soak SERVER={server})"
    return (
        f"{slope_text(rec)} over {rec.duration_s:g} s at {rec.offered_rps:g} req/s"
        + later_slope_text(rec)
    )


def limits_cell(server: str, found: dict[str, str], has_workers: bool) -> str:
    """The worker rule under a container's limits, with the evidence at each limit."""
    if not has_workers:
        return "not supported by the server (one process: no worker rule)"
    return found.get(server, f"not measured ({LIMITS_RUN}, with arms for {server})")


def _row(server: str, spec: ServerSpec, records: list[Record], limits: dict[str, str]) -> list[str]:
    """One catalog server's row."""
    why = spec.reload_why if spec.reload_signal is None else None
    workers = "workers" in spec.knobs
    return [
        server,
        reload_cell(server, records, why),
        recycle_cell(server, records, spec.recycle_why if spec.recycle_argv is None else None),
        quota_cell(server, records, workers, workers and spec.knobs["workers"].default == "cpus"),
        memory_cell(server, records),
        limits_cell(server, limits, workers),
    ]


def production_sections(records: list[Record], checks: Checks | None = None) -> list[str]:
    """The section, when any record of a production behaviour exists (`checks`: the container
    study's verdicts on its pairs, bench.studies.sources.limit_checks)."""
    relevant = [
        r
        for r in records
        if r.lifecycle is not None
        or r.cgroup is not None
        or r.series is not None
        or r.recycles is not None
        or r.container is not None
        or unsupported_code(r) in ("reload", "recycle")
    ]
    if not relevant:
        return []
    specs = load_all()
    limits = {a.server: a.text for a in advice(records, checks)}
    rows = [
        _row(server, spec, records, limits)
        for server, spec in sorted(specs.items())
        if server not in NOT_CATALOG
    ]
    header = [
        "server",
        "graceful reload under load",
        "worker recycling",
        "CPU-quota penalty of the default worker rule (/db)",
        "memory slope",
        "workers under a container's limits (/db)",
    ]
    return [
        "## Production behaviours",
        "",
        "Reload: the server's own reload signal (servers/<id>/server.toml [reload]) in the "
        "middle of an open-loop window (oha); failed = every request without a 2xx answer in "
        "the window, late = answered 2xx past one fixed limit for every server (LATE_LIMIT_MS, "
        f"{LATE_LIMIT_MS:g} ms; records before format 16: 3 × the server's own p99 before the "
        "signal, at least +100 ms, and no late count), recovered = until 99 % of the offered "
        "rate is answered 2xx within that limit again. CPU quota: the server's rule (workers = "
        "the CPUs os.cpu_count() sees) against the same rule counted from a cgroup CPU quota "
        "(the quota the records ran at is named in the cell; study cpu-quota or two make bench "
        "runs; each quota its own comparison), shown only where the quota bound "
        "(the kernel throttled the server: throttled ms > 0); + means the rule that ignores "
        "the quota served more, [interval] over trials. Container limits: each server in its "
        "image under the engine's --cpus (and --memory), its default worker rule against "
        "workers = the CPU limit rounded up; the rule the study's checks favour at each "
        "limit, as its section judges them (p99 and req/s under a CPU limit, OOM kills under "
        "a memory limit).",
        "",
        *markdown_table(header, rows, "llllll"),
        "",
    ]
