"""bench.report.limits: workers as a function of a container's limits, from records that carry
a container and a workers rule — pairs found by what they carry, each limit judged by its
intervals, the advice per server, and the lines the study, Production behaviours and the
recommendations show."""

import dataclasses
import json
from pathlib import Path

from bench.core.record import Record
from bench.report import limits
from bench.report.production import limits_cell
from bench.report.recommend import limits_lines
from bench.studies.container import per_server_lines

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


def test_a_cpu_limit_favours_the_rule_with_the_lower_p99() -> None:
    """p99 decided lower for the quota rule and its req/s within 5 %: workers = the limit."""
    recs = _trials("cpus", [{"p99": v} for v in (40.0, 42.0, 41.0)]) + _trials(
        "quota", [{"p99": v} for v in (20.0, 21.0, 20.5)]
    )
    (advice,) = limits.advice(recs)
    assert advice.rule == "quota"
    assert advice.text.startswith(
        "workers = the CPU limit rounded up, at least 1 — --cpus=0.5: 1 worker (the CPU limit "
        "rounded up) favoured (p99 quota/default 0.50×"
    )
    assert "p99 quota/default 0.50×" in advice.text


def test_lower_p99_at_a_fifth_less_req_s_is_a_trade_off() -> None:
    """The quota rule's p99 lower but its req/s decided below 95 % of the default's: no rule."""
    recs = _trials("cpus", [{"p99": 40.0 + n, "rps": 1000.0 + n} for n in range(3)]) + _trials(
        "quota", [{"p99": 20.0 + n, "rps": 600.0 + n} for n in range(3)]
    )
    (advice,) = limits.advice(recs)
    assert advice.rule is None
    assert "a trade-off" in advice.text
    assert advice.text.startswith("not enough evidence — run: `make study NAME=container-limits`")


def test_a_limit_that_never_throttled_decides_nothing() -> None:
    """0 ms throttled in every trial of both rules: the limit did not bind."""
    recs = _trials("cpus", [{"p99": 40.0 + n, "throttled": 0.0} for n in range(3)]) + _trials(
        "quota", [{"p99": 20.0 + n, "throttled": 0.0} for n in range(3)]
    )
    (judged,) = limits.advice(recs)[0].judged
    assert judged.favoured is None and "did not bind" in judged.evidence


def test_oom_kills_of_the_default_rule_favour_the_limit() -> None:
    """Under a memory limit: the default rule's kills against none: the difference's interval
    lies below 0 (counts: no log)."""
    memory = 160 * MiB
    recs = _trials("2*cpus+1", [{"kills": k} for k in (12, 9, 14)], memory=memory) + _trials(
        "quota", [{"kills": 0}] * 3, memory=memory
    )
    (advice,) = limits.advice(recs)
    (judged,) = advice.judged
    assert judged.pair.limit.label() == "--cpus=0.5 --memory=160m"
    assert judged.favoured == "quota"
    assert "OOM kills 12 vs 0 a trial" not in judged.evidence  # a mean, not the first trial
    assert "OOM kills 11.7 vs 0.0 a trial, quota − default -11.7 [" in judged.evidence


def test_a_default_rule_that_failed_every_run_counts_its_kills() -> None:
    """Every run of the default rule failed (the server exited after OOM kills), the quota
    rule's all ran: the quota rule is favoured and the failed runs' kills are shown."""
    memory = 160 * MiB
    recs = _trials("cpus", [{"kills": 3, "status": "failed"}] * 3, memory=memory) + _trials(
        "quota", [{}] * 3, memory=memory
    )
    (advice,) = limits.advice(recs)
    assert advice.rule == "quota"
    assert "every run of the default rule failed (server exited with code 1" in advice.text
    assert limits.Side("cpus", recs[:3]).oom_kills() == [3.0, 3.0, 3.0]


def test_one_trial_is_not_enough_evidence() -> None:
    recs = [_rec("cpus", 1, p99=40.0), _rec("quota", 1, p99=20.0)]
    (advice,) = limits.advice(recs)
    assert advice.rule is None and "fewer than 2 ok trials a side" in advice.text


def test_rules_favoured_at_different_limits_depend_on_the_limit() -> None:
    """The default rule wins on p99 at a CPU limit, the quota rule on OOM kills at a memory
    limit: the advice names both, not one rule."""
    memory = 160 * MiB
    recs = (
        _trials("cpus", [{"p99": 20.0 + n} for n in range(3)])
        + _trials("quota", [{"p99": 40.0 + n} for n in range(3)])
        + _trials("cpus", [{"kills": k} for k in (5, 6, 7)], memory=memory)
        + _trials("quota", [{}] * 3, memory=memory)
    )
    (advice,) = limits.advice(recs)
    assert advice.rule is None
    assert advice.text.startswith(
        "depends on the limit — --cpus=0.5: 5 workers (os.cpu_count()) favoured"
    )
    assert "--cpus=0.5 --memory=160m: 1 worker (the CPU limit rounded up) favoured" in advice.text


def test_the_three_renderers_say_the_same_rule() -> None:
    """The study's per-server block, Production behaviours' cell and the recommendations'
    line carry the same advice text; no record: the command that measures it."""
    recs = _trials("cpus", [{"p99": v} for v in (40.0, 42.0, 41.0)]) + _trials(
        "quota", [{"p99": v} for v in (20.0, 21.0, 20.5)]
    )
    (advice,) = limits.advice(recs)
    block = per_server_lines(recs)
    assert f"Worker rule under a limit: {advice.text}." in block
    assert "| --cpus=0.5 | os.cpu_count() (5) |" in "\n".join(block)
    assert limits_cell("granian", {"granian": advice.text}, True) == advice.text
    assert limits_lines(recs)[2] == f"- **granian**: {advice.text}."
    assert limits_lines([]) == [
        "Workers under a container's CPU and memory limits (default rule vs the limit's): "
        "not enough evidence — run: `make study NAME=container-limits`.",
        "",
    ]
    assert limits_cell("waitress", {}, False).startswith("not supported by the server")


def test_real_records_of_gunicorn_sync_at_half_a_cpu() -> None:
    """Six records of the study's run here (gunicorn-sync at --cpus=0.5, 2 workers from
    os.cpu_count() against 1 from the limit, 3 trials each): the limit bound in every trial,
    and the intervals (Bonferroni over this pair's two tests) favour 1 worker on p99, its req/s
    not decided below 95 % of the default's."""
    paths = sorted((FIXTURE / "limits").glob("*.json"))
    recs = [Record.from_dict(json.loads(p.read_text())) for p in paths]
    assert len(recs) == 6 and {r.format_version for r in recs} == {9}
    (advice,) = limits.advice(recs)
    (judged,) = advice.judged
    assert judged.favoured == "quota"
    assert advice.text.startswith(
        "workers = the CPU limit rounded up, at least 1 — --cpus=0.5: 1 worker (the CPU limit "
        "rounded up) favoured (p99 quota/default 0.66× [0.61–0.71], req/s quota/default 1.05× "
        "[0.99–1.13])"
    )
    assert all(v > 0 for v in judged.pair.default.throttled_ms())


def test_a_thrashing_default_rule_without_kills_is_judged_by_what_the_load_saw() -> None:
    """Granian's 5 workers under its limit: no kill, but the runs crawl (p99 seconds): the
    kills do not decide, p99 and req/s do."""
    memory = 121 * MiB
    recs = _trials(
        "2*cpus+1", [{"p99": 1700.0 + 100 * n, "rps": 10.0 + n} for n in range(3)], memory=memory
    ) + _trials("quota", [{"p99": 53.0 + n, "rps": 1300.0 + n} for n in range(3)], memory=memory)
    (judged,) = limits.advice(recs)[0].judged
    assert judged.favoured == "quota"
    assert judged.evidence.startswith(
        "OOM kills 0.0 vs 0.0 a trial, quota − default +0 [+0, +0]; p99"
    )


def test_the_recommendations_show_the_rule_without_steady_runs() -> None:
    """Records of the container study alone (nothing to rank): the Recommendations section
    still gives each server's worker rule under a limit."""
    from bench.report.recommend import recommendations_section

    recs = _trials("cpus", [{"p99": v} for v in (40.0, 42.0, 41.0)]) + _trials(
        "quota", [{"p99": v} for v in (20.0, 21.0, 20.5)]
    )
    lines = recommendations_section(recs)
    assert lines[0] == "## Recommendations"
    assert lines[4].startswith("- **granian**: workers = the CPU limit rounded up, at least 1")
    assert recommendations_section([]) == []
