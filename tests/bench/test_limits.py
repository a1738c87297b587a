"""bench.report.limits: workers as a function of a container's limits, from records that carry
a container and a workers rule — pairs found by what they carry, each limit judged by the
study's checks of it, the advice per server, and the lines the study, Production behaviours and the
recommendations show."""

import dataclasses
import json
from pathlib import Path

from bench.core.record import Record
from bench.report import limits
from bench.report.production import limits_cell
from bench.report.recommend import limits_lines
from bench.studies.container import per_server_lines
from bench.studies.schema import load_study
from bench.studies.sections import study_section

FIXTURE = Path(__file__).parent.parent / "fixtures" / "container_records"
BASE = Record.from_dict(json.loads((FIXTURE / "granian-db-docker-cpus1.json").read_text()))
MiB = 2**20


def _rec(
    rule: str,
    trial: int,
    *,
    rps: float = 1000.0,
    p99: float = 20.0,
    throttled: float = 300.0,
    cpus: float = 0.5,
    memory: int | None = None,
    kills: int = 0,
    status: str = "ok",
    server: str = "granian",
) -> Record:
    """A container record of the study's kind, its figures replaced."""
    workers = 1 if rule == "quota" else 5
    box = dict(BASE.container or {})
    box.update(cpus=cpus, memory_bytes=memory, throttled_ms=throttled, oom_kills=kills)
    meta = dict(BASE.metadata) | {
        "workers_rule": rule,
        "study": "container-limits",
        "study_run": "run1",
        "study_arm": f"{server}-{'quota' if rule == 'quota' else 'cpus'}-{round(cpus * 100)}",
        "started_at": f"2026-11-24T00:0{trial}:00Z",
    }
    if status == "failed":
        box = {k: box[k] for k in ("image", "cpus", "memory_bytes", "network")}
        box["oom_kills_total"] = kills
        return dataclasses.replace(
            BASE,
            status="failed",
            reason=f"server exited with code 1 during load ({kills} OOM kill(s) in the "
            "container's cgroup)",
            server=server,
            trial=trial,
            knobs={"workers": workers},
            rps=None,
            latency_ms=None,
            container=box,
            metadata=meta,
        )
    latency = dict(BASE.latency_ms or {}) | {"p99": p99}
    return dataclasses.replace(
        BASE,
        server=server,
        trial=trial,
        knobs=dict(BASE.knobs or {}) | {"workers": workers},
        rps=rps,
        latency_ms=latency,
        container=box,
        metadata=meta,
    )


def _trials(rule: str, values: list[dict], **common) -> list[Record]:
    return [_rec(rule, n + 1, **common, **v) for n, v in enumerate(values)]


def test_pairs_are_found_by_what_records_carry() -> None:
    """A container, a workers rule and /db make a pair per server and limit; a record without
    a rule (plain make bench) or without a container is not one."""
    recs = _trials("2*cpus+1", [{}] * 3) + _trials("quota", [{}] * 3)
    plain = dataclasses.replace(BASE, metadata={**BASE.metadata})
    native = dataclasses.replace(recs[0], container=None)
    found = limits.pairs([*recs, plain, native])
    assert len(found) == 1
    pair = found[0]
    assert (pair.server, pair.limit.label()) == ("granian", "--cpus=0.5")
    assert pair.default.rule == "2*cpus+1" and len(pair.default.records) == 3
    assert pair.quota.workers == 1 and pair.default.workers == 5


def _check(metric: str, kind: str, result: str, *, separated: bool = True, a: str = "quota"):
    """The study's verdict on one comparison (a = the quota rule unless said)."""
    b = "cpus" if a == "quota" else "quota"
    held = {"reproduced": "holds", "not reproduced": "does not hold"}.get(result, result)
    return limits.Check(metric, kind, a, b, result, separated, held, "a/b 0.50× [0.40–0.60]")


def _judged(recs: list[Record], *checks: limits.Check) -> limits.Judged:
    (pair,) = limits.pairs(recs)
    return limits.judge_pair(pair, list(checks))


CPU = _trials("cpus", [{"p99": 40.0 + n} for n in range(3)]) + _trials(
    "quota", [{"p99": 20.0 + n} for n in range(3)]
)


def test_a_cpu_limit_favours_the_rule_the_studys_p99_check_holds_for() -> None:
    """The study's p99 check held (the quota rule's p99 below the default's) and its req/s
    check did not go against it: 1 worker is favoured, with the study's words."""
    judged = _judged(
        CPU,
        _check("p99_ms", "less", "reproduced"),
        _check("rps", "at_most", "reproduced", separated=False, a="cpus"),
    )
    assert judged.favoured == "quota"
    assert judged.evidence.startswith("p99 holds (a/b 0.50× [0.40–0.60]); req/s holds (")


def test_lower_p99_and_more_req_s_for_the_other_rule_is_a_trade_off() -> None:
    """p99 check held for the quota rule, the req/s check separated against it (the default
    serves more than 5 % more): no rule."""
    judged = _judged(
        CPU,
        _check("p99_ms", "less", "reproduced"),
        _check("rps", "at_most", "not reproduced", a="cpus"),
    )
    assert judged.favoured is None and "a trade-off" in judged.evidence


def test_an_inconclusive_check_decides_nothing_and_no_check_is_undecided() -> None:
    """The study's check inconclusive (or one trial): undecided, never "favoured"; a pair no
    check of the study compares: undecided too (the tables judge nothing of their own)."""
    judged = _judged(CPU, _check("p99_ms", "less", "inconclusive", separated=False))
    assert judged.favoured is None and judged.evidence.startswith("p99 inconclusive: a/b")
    assert _judged(CPU).favoured is None
    assert _judged(CPU).evidence == "no check of the study compares them"
    (advice,) = limits.advice(CPU)
    assert advice.rule is None
    # the command races this server's arms alone, so it can decide what the row leaves open
    command = "`make study NAME=container-limits TRIALS=auto ARMS=granian-cpus-50,granian-quota-50`"
    assert advice.text.startswith(f"not enough evidence — run: {command}")


def test_a_failure_reason_is_shortened_at_a_word_never_inside_one() -> None:
    """The reference's "(last error: timed o)": a 101-character reason cut at 100."""
    reason = (
        "server did not start: gunicorn-gthread: not answering GET /plaintext after 60 s "
        "(last error: timed out)"
    )
    recs = [
        dataclasses.replace(r, status="failed", reason=reason, rps=None, latency_ms=None)
        for r in _trials("cpus", [{}] * 3)
    ] + _trials("quota", [{}] * 3)
    judged = _judged(recs, _check("p99_ms", "less", "inconclusive", separated=False))
    prefix = "every run of the default rule failed ("
    assert judged.evidence.startswith(prefix), judged.evidence
    note = judged.evidence[len(prefix) :].split("); ")[0]
    assert note.endswith(" …") and len(note) <= 100, note
    assert set(note.split()) - {"…"} <= set(reason.split()), note  # whole words only


def test_a_memory_limit_is_decided_by_the_oom_check() -> None:
    """Under a memory limit the OOM kills check decides (p99 checks of it do not); a default
    rule whose every run failed is said beside the verdict, not instead of it."""
    memory = 160 * MiB
    recs = _trials("cpus", [{"kills": 3, "status": "failed"}] * 3, memory=memory) + _trials(
        "quota", [{}] * 3, memory=memory
    )
    held = _judged(recs, _check("oom_kills", "less", "reproduced"))
    assert held.favoured == "quota"
    assert held.evidence.startswith("every run of the default rule failed (server exited with")
    undecided = _judged(
        recs,
        _check("oom_kills", "less", "inconclusive", separated=False),
        _check("p99_ms", "less", "reproduced"),
    )
    assert undecided.favoured is None
    assert limits.Side("cpus", recs[:3]).oom_kills() == [3.0, 3.0, 3.0]


def test_rules_favoured_at_different_limits_depend_on_the_limit() -> None:
    """The default rule's p99 decided lower at a CPU limit, the quota rule's OOM kills at a
    memory limit: the advice names both, not one rule."""
    memory = 160 * MiB
    recs = (
        _trials("cpus", [{"p99": 20.0 + n} for n in range(3)])
        + _trials("quota", [{"p99": 40.0 + n} for n in range(3)])
        + _trials("cpus", [{"kills": k} for k in (5, 6, 7)], memory=memory)
        + _trials("quota", [{}] * 3, memory=memory)
    )
    cpu, mem = limits.pairs(recs)
    checks = {
        (cpu.server, cpu.limit, cpu.run): [_check("p99_ms", "less", "not reproduced")],
        (mem.server, mem.limit, mem.run): [_check("oom_kills", "less", "reproduced")],
    }
    (advice,) = limits.advice(recs, checks)
    assert advice.rule is None
    assert advice.text.startswith(
        "depends on the limit — --cpus=0.5: 5 workers (os.cpu_count()) favoured"
    )
    assert "--cpus=0.5 --memory=160m: 1 worker (the CPU limit rounded up) favoured" in advice.text


REFERENCE = Path(__file__).parent.parent / "fixtures" / "reference-2026-11" / "records"


def _reference() -> tuple[list[Record], dict]:
    """The previous reference's container-limits run (72 records) and the study's verdicts on
    its pairs, judged as its section judges them."""
    from bench.studies.sources import limit_checks

    recs = [
        Record.from_dict(json.loads(p.read_text()))
        for p in sorted(REFERENCE.glob("20261124T04*_vm_*_db_c10_*.json"))
    ]
    recs = [r for r in recs if r.metadata.get("study") == "container-limits"]
    return recs, limit_checks(recs)


def test_the_tables_and_the_studys_checks_give_one_verdict() -> None:
    """The previous reference: the study's check said gunicorn-gthread's p99 at --cpus=0.5
    "inconclusive" (0.84× [0.69–1.02], Holm over 28) while the tables' own intervals (a
    family of 5) said "1 worker favoured". Now every renderer shows the study's check: the
    per-server block, Production behaviours' cell and the recommendations' line."""
    recs, checks = _reference()
    assert len(recs) == 72
    found = {a.server: a for a in limits.advice(recs, checks)}
    gthread = {j.pair.limit.label(): j for j in found["gunicorn-gthread"].judged}
    assert gthread["--cpus=0.5"].favoured is None
    assert "p99 inconclusive: a/b 0.84× [0.69–1.02]" in gthread["--cpus=0.5"].evidence
    sync = {j.pair.limit.label(): j for j in found["gunicorn-sync"].judged}
    assert sync["--cpus=0.5"].favoured == "quota"
    assert "p99 holds (a/b 0.67× [0.57–0.79], 3 rounds paired, Holm over 28 checks)" in (
        sync["--cpus=0.5"].evidence
    )
    study = load_study("container-limits")
    block = "\n".join(per_server_lines(study, recs))
    for advice in found.values():
        assert f"Worker rule under a limit: {advice.text}." in block
        assert limits_cell(advice.server, {advice.server: advice.text}, True) == advice.text
    assert f"- **gunicorn-gthread**: {found['gunicorn-gthread'].text}." in limits_lines(
        recs, checks
    )


def test_a_thrashing_arm_shows_its_requests_never_a_ratio() -> None:
    """Granian's 5 workers under --memory=121m served 17, 54 and 33 requests in its windows:
    its cells say so with the counts; no interval such as "128.37× [4.62–3565.55]"."""
    recs, checks = _reference()
    block = "\n".join(per_server_lines(load_study("container-limits"), recs))
    marked = "too few requests to measure (17, 54, 33 requests per window; thrashing)"
    assert f"| --cpus=0.5 --memory=121m | 2 × os.cpu_count() + 1 (5) | {marked} | {marked} |" in (
        block
    )
    assert "128.37" not in block and "3565" not in block
    (granian,) = [a for a in limits.advice(recs, checks) if a.server == "granian"]
    assert (
        f"default rule: {marked}" in granian.text
        and "×" not in granian.text.split("--memory=121m")[1].split("OOM")[0]
    )


def test_an_arm_has_one_statistic_in_both_tables() -> None:
    """The study's results table and the per-server table say the same req/s and p99 of an
    arm (the geometric mean over trials), not a median in one and a geometric mean in the
    other (granian at --cpus=0.5, the quota rule: 1,428 median vs 1,535 geometric mean)."""
    recs, _ = _reference()
    study = load_study("container-limits")
    lines = study_section(study, recs, None)
    arm = next(
        line
        for line in lines
        if line.startswith("| granian, workers = the CPU limit, --cpus=0.5 |")
    )
    per_server = next(
        line
        for line in lines
        if line.startswith("| --cpus=0.5 | the CPU limit rounded up (1) |") and "1,535" in line
    )
    assert "| 1,535 | 46.3 |" in arm, arm
    assert per_server.split(" | ")[2].startswith("1,535 [")
    assert per_server.split(" | ")[3].startswith("46.3 [")


def test_real_records_of_gunicorn_sync_at_half_a_cpu() -> None:
    """Six records of the study's run here (gunicorn-sync at --cpus=0.5, 2 workers from
    os.cpu_count() against 1 from the limit, 3 trials each), judged by the study's engine:
    its p99 check holds and decides the limit."""
    from bench.studies.container import checks_of
    from bench.studies.verdict import outcomes

    paths = sorted((FIXTURE / "limits").glob("*.json"))
    recs = [Record.from_dict(json.loads(p.read_text())) for p in paths]
    assert len(recs) == 6 and {r.format_version for r in recs} == {9}
    checks = checks_of(outcomes(load_study("container-limits"), recs), recs)
    (advice,) = limits.advice(recs, checks)
    (judged,) = advice.judged
    assert judged.favoured == "quota", judged.evidence
    assert advice.text.startswith(
        "workers = the CPU limit rounded up, at least 1 — --cpus=0.5: 1 worker (the CPU limit "
        "rounded up) favoured (p99 holds ("
    )
    assert all(v > 0 for v in judged.pair.default.throttled_ms())


def test_the_recommendations_show_the_rule_without_steady_runs() -> None:
    """Records of the container study alone (nothing to rank): the Recommendations section
    still gives each server's worker rule under a limit."""
    from bench.report.recommend import recommendations_section

    (pair,) = limits.pairs(CPU)
    checks = {(pair.server, pair.limit, pair.run): [_check("p99_ms", "less", "reproduced")]}
    lines = recommendations_section(CPU, checks)
    assert lines[0] == "## Recommendations"
    assert lines[4].startswith("- **granian**: workers = the CPU limit rounded up, at least 1")
    assert recommendations_section([]) == []


def test_a_thrashing_window_is_no_figure_in_the_studys_table_or_plot() -> None:
    """The same arm in the study's results table and plot: its windows' req/s and p99 (a
    handful of requests; 4.19 req/s and p99 4,400 ms on the AMD machine) are left out, as
    the per-server table's "too few requests to measure" says, never tabled or drawn as a
    bar; its throttled time, a figure of the container, stays."""
    from bench.core.record import thrashed
    from bench.studies.sections import study_series

    recs, _ = _reference()
    study = load_study("container-limits")
    thin = [r for r in recs if thrashed(r)]
    assert sorted(r.requests for r in thin) == [17, 33, 54]
    (arm,) = {str(r.metadata["study_arm"]) for r in thin}
    label = next(a.label for a in study.arms if a.id == arm)
    row = next(line for line in study_section(study, recs, None) if line.startswith(f"| {label} |"))
    cells = row.split(" | ")
    assert cells[3:5] == ["–", "–"], row  # req/s, p99
    assert cells[5] != "–", row  # throttled ms
    panels = {p.metric: p for p in study_series(study, recs)}
    assert panels["p99 ms"].series[label] == [(10, None)]
    assert panels["req/s"].series[label] == [(10, None)]
    assert panels["throttled ms"].series[label][0][1] is not None
