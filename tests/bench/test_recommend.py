"""Recommendations and the summary as an answer (bench.report.recommend, bench.report.summary):
a recommendation only where the intervals decide, never a baseline, the first screen holds
the answer, tables of at most 9 columns, files world-readable; the rules beyond one load
(rank 1 at every other load, the capacity route, the keep-alive from the race study, the CPU
quota deployment)."""

import math
import re
import stat
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from bench.core.record import Record, load_records
from bench.report import standings
from bench.report.cells import host_of
from bench.report.groups import BASELINES, groups, starved
from bench.report.recommend import (
    NOT_ENOUGH,
    _row,
    arenas,
    balancer_idle_s,
    command_line,
    deployment_runs,
    recommendations,
)
from bench.report.summary import render_report, render_summary, write_summary

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
ROOT = FIXTURES.parents[1]
FIRST_SCREEN = 60
MAX_COLUMNS = 9


def _base() -> Record:
    """A real plaintext record of the fixtures: granian, direct, wrk."""
    records, _ = load_records(FIXTURES / "records")
    return next(r for r in records if r.server == "granian" and r.scenario == "plaintext")


def _trials(rec: Record, server: str, knobs: dict, rps: list[float]) -> list[Record]:
    return [
        replace(rec, server=server, knobs=knobs, rps=value, trial=i, run_id=f"{server}{i}" * 4)
        for i, value in enumerate(rps, start=1)
    ]


def _serving(records: list[Record], share: float) -> list[Record]:
    """The runs with the mean latency at which `share` of their connections had a request in
    flight (Little's law, bench.report.groups.served_share)."""
    return [
        replace(r, latency_ms={**(r.latency_ms or {}), "mean": share * r.concurrency / r.rps * 1e3})
        for r in records
    ]


def test_a_server_whose_other_knob_set_was_ranked_apart_keeps_its_knobs_in_the_race() -> None:
    """gunicorn-sync at workers=1 serves 16 % of its connections (ranked apart) and at
    workers=5 all of them: the race names the one it races "gunicorn-sync workers=5", as it
    names the one apart "gunicorn-sync workers=1". Judged over the served runs alone, the
    race called it plain "gunicorn-sync", which of the two left unsaid."""
    base = _base()
    w1 = _serving(_trials(base, "gunicorn-sync", {"workers": 1}, [3000.0, 3010.0, 2990.0]), 0.16)
    w5 = _serving(_trials(base, "gunicorn-sync", {"workers": 5}, [1000.0, 1010.0, 990.0]), 1.0)
    other = _serving(_trials(base, "granian", {}, [2000.0, 2020.0, 1980.0]), 1.0)
    race = standings.judge_served([*w1, *w5, *other])
    assert race is not None
    assert race.apart == ("gunicorn-sync workers=1",)
    assert set(race.figures) == {"gunicorn-sync workers=5", "granian"}
    assert race.label(w5[0]) == "gunicorn-sync workers=5"


def _arena(leader_rps: list[float], other_rps: list[float]) -> list[Record]:
    base = replace(_base(), concurrency=50)
    return [
        *_trials(base, "granian", {"workers": 2, "threads": 4, "backlog": 1024}, leader_rps),
        *_trials(base, "gunicorn-sync", {"workers": 2, "backlog": 2048}, other_rps),
        # the ceiling, far ahead: a reference line, never recommended
        *_trials(base, "nginx-static", {"workers": 2, "backlog": 1024}, [90e3, 91e3, 92e3]),
    ]


def test_a_separated_leader_is_recommended_with_its_command_never_a_baseline() -> None:
    """granian significantly ahead of gunicorn-sync (nginx-static fastest of all): granian
    is recommended with its declared command line and knobs, gunicorn-sync is the one to
    avoid with both figures; nginx-static appears nowhere in the answer."""
    records = _arena([20_000.0, 20_100.0, 19_900.0], [6_000.0, 6_050.0, 5_950.0])
    recs, _ = recommendations(records)
    direct = next(r for r in recs if r.workload == "light CPU" and r.deployment == "direct")
    assert direct.server == "granian"
    assert direct.command == command_line("granian", direct.knobs)
    assert "--workers 2 --blocking-threads 4 --backlog 1024" in direct.command
    assert "rank 1 of 2 by req/s" in direct.evidence and "20,000" in direct.evidence
    assert direct.avoid.startswith("gunicorn-sync w2 b2048: 6,000 vs 20,000 req/s")
    assert all(r.server != "nginx-static" for r in recs)
    summary = render_summary(records, [])
    answer = summary.split("## Recommendations")[1].split("## At a glance")[0]
    rows = [line for line in answer.splitlines() if line.startswith("| ")]
    assert rows and not any("nginx-static" in row for row in rows)
    assert "**granian** w2 t4 b1024" in answer


def test_overlapping_leaders_get_not_enough_evidence_and_a_command() -> None:
    """Two configurations whose intervals overlap: no recommendation, the make command that
    would decide instead."""
    records = _arena([20_000.0, 12_000.0, 16_000.0], [15_000.0, 19_000.0, 14_000.0])
    recs, _ = recommendations(records)
    direct = next(r for r in recs if r.workload == "light CPU" and r.deployment == "direct")
    assert direct.server is None
    servers = direct.command.split("SERVER=")[1].split()[0]
    assert set(servers.split(",")) == {"granian", "gunicorn-sync"}  # best point estimate first
    assert (
        direct.command.startswith("make bench SERVER=") and "SCENARIO=plaintext" in direct.command
    )
    assert "TRIALS=5" in direct.command
    assert f"{NOT_ENOUGH} `{direct.command}`" in render_summary(records, [])


def test_the_first_screen_holds_the_answer_for_every_workload_and_deployment() -> None:
    """Over the fixture records: "The answer" opens the summary within the first 60 lines,
    one row per workload × deployment of the recommendations, each with a pick or "no pick
    yet" and how sure in words; the recommendations' table follows."""
    records, problems = load_records(FIXTURES / "records")
    lines = render_summary(records, problems).splitlines()
    first = lines[:FIRST_SCREEN]
    assert "## The answer" in first and "## Recommendations" in lines
    start = first.index("## The answer")
    end = next(i for i, line in enumerate(lines) if i > start and line.startswith("## "))
    answer = [line for line in lines[start:end] if line.startswith(("| light CPU", "| database"))]
    assert end <= FIRST_SCREEN
    recs, _ = recommendations(records)
    assert len(answer) == len(recs) > 0
    for rec, row in zip(recs, answer, strict=True):
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[:2] == [rec.workload, rec.deployment]
        assert cells[3] == rec.sure != ""


def _columns(text: str) -> list[int]:
    """Columns of every markdown table in text (from its rule line)."""
    return [
        line.count("|") - 1 for line in text.splitlines() if re.fullmatch(r"\|(:?-+:?\|)+", line)
    ]


def test_no_table_of_the_summary_has_more_than_nine_columns() -> None:
    """summary.md and the speed detail files: at most 9 columns per table."""
    records, problems = load_records(FIXTURES / "records")
    files = render_report(records, problems)
    checked = [files["summary.md"], *(t for n, t in files.items() if "/speed-" in n)]
    columns = [c for text in checked for c in _columns(text)]
    assert columns and max(columns) <= MAX_COLUMNS


def test_written_files_are_world_readable(tmp_path: Path) -> None:
    """summary.md and every detail file: mode 0644, whatever mkstemp's 0600."""
    import shutil

    shutil.copytree(FIXTURES / "records" / "machine-a", tmp_path / "records")
    write_summary(tmp_path)
    written = [tmp_path / "summary.md", *(tmp_path / "details").iterdir()]
    assert len(written) > 3
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o644 for p in written)


def test_links_stay_inside_the_results() -> None:
    """No link of summary.md or a detail file climbs out of the results directory."""
    records, problems = load_records(FIXTURES / "records")
    for name, text in render_report(records, problems).items():
        depth = name.count("/")
        for target in re.findall(r"\]\(([^)]+)\)", text):
            assert target.count("../") <= depth, (name, target)


# -- the rules beyond one load: each on records built from the fixtures, the expectation
# computed here (scipy's Welch test on the logs, by-hand hypergeometric tails, by-hand
# capacity brackets), not read from bench.report


def _welch_p(a: list[float], b: list[float]) -> float:
    return float(stats.ttest_ind(np.log(a), np.log(b), equal_var=False).pvalue)


SEPARATED = ([20_000.0, 20_100.0, 19_900.0], [6_000.0, 6_050.0, 5_950.0])
TIED = ([15_000.0, 19_000.0, 14_000.0], [16_000.0, 12_000.0, 20_000.0])


def _two_loads(at_10: tuple[list[float], list[float]]) -> list[Record]:
    """granian significantly ahead at c50; at c10 the given req/s (granian, gunicorn-sync)."""
    base = replace(_base(), concurrency=10)
    return [
        *_arena(*SEPARATED),
        *_trials(base, "granian", {"workers": 2, "threads": 4, "backlog": 1024}, at_10[0]),
        *_trials(base, "gunicorn-sync", {"workers": 2, "backlog": 2048}, at_10[1]),
    ]


def _direct(records: list[Record], workload: str = "light CPU") -> object:
    recs, _ = recommendations(records)
    return next(r for r in recs if r.workload == workload and r.deployment == "direct")


def test_a_leader_at_one_load_must_hold_rank_1_at_every_other_load() -> None:
    """granian separated at c50 (Welch p < 0.001 on the logs): recommended when c10 is a tie
    (p > 0.3: it holds rank 1 there); not when gunicorn-sync leads c10 separated (two
    leaders: the command compares both), nor when at c10 gunicorn-sync and uvicorn, tied with
    each other, are both separated ahead of granian (no leader there, but granian's rank at
    c10 is 3, so it does not hold 1 at every load)."""
    assert _welch_p(*SEPARATED) < 0.001 and _welch_p(*TIED) > 0.3
    held = _direct(_two_loads(TIED))
    assert held.server == "granian"
    beaten = _direct(_two_loads((SEPARATED[1], SEPARATED[0])))
    assert beaten.server is None
    assert beaten.command.startswith("make bench SERVER=")
    assert set(beaten.command.split("SERVER=")[1].split()[0].split(",")) == {
        "granian",
        "gunicorn-sync",
    }
    top = [20_050.0, 19_950.0, 20_000.0]
    assert _welch_p(SEPARATED[0], top) > 0.3 and _welch_p(top, SEPARATED[1]) < 0.001
    third = [
        *_two_loads((SEPARATED[1], SEPARATED[0])),
        *_trials(replace(_base(), concurrency=10), "uvicorn", {"workers": 2}, top),
    ]
    assert _direct(third).server is None


def test_the_capacity_route_recommends_the_winner_of_the_capacity_race() -> None:
    """tests/fixtures/capacity-pair with granian's ladder moved per round (×1, ×1.1, ×0.95):
    the capacity race (each round's crossing, paired by round) separates granian from
    gunicorn-sync, so granian is recommended for the slow upstream workload (/sleep) with
    its capacity and the paired ratio as evidence; as recorded, the ratio is 2.00 in every
    round (no spread: undecided) and the command is make capacity for both; two searches of
    one configuration are one configuration: nothing to compare."""
    records, _ = load_records(FIXTURES / "capacity-pair")
    pair = [r for r in records if r.metadata["capacity"]["search"][0] in "ab"]
    shift = {1: 1.0, 2: 1.1, 3: 0.95}
    moved = [
        replace(r, offered_rps=r.offered_rps * shift[r.trial]) if r.server == "granian" else r
        for r in pair
    ]
    both = _direct(moved, "slow upstream")
    assert both.server == "granian"
    assert "capacity at p99 ≤ 100 ms: " in both.evidence
    assert "the next (paired by round, 3 rounds: separated): gunicorn-sync" in both.evidence
    same = _direct([r for r in records if r.server == "gunicorn-sync"], "slow upstream")
    assert same.server is None
    assert same.command == "make capacity SERVER=gunicorn-sync SCENARIO=sleep"
    tied = _direct(pair, "slow upstream")
    assert tied.server is None
    assert tied.command == "make capacity SERVER=granian,gunicorn-sync SCENARIO=sleep"


def _race(base: Record, keepalive: int, lost: int, sent: int) -> Record:
    """A race arm's record behind the ALB-like front (an experiment: never ranked), as the
    lb-keepalive-race study writes it."""
    arm = "gevent-fix" if keepalive > 60 else "gevent-default"
    meta = {**base.metadata, "study": "lb-keepalive-race", "study_arm": arm, "study_run": "r1"}
    return replace(
        base,
        server="gunicorn-gevent",
        knobs={"workers": 2, "connections": 1000, "keepalive": keepalive},
        proxy="alb",
        network={"race": {"sent": sent}},
        errors={**(base.errors or {}), "proxy_by_status": {"502": lost}},
        run_id=f"race{keepalive}" * 4,
        metadata=meta,
    )


@pytest.mark.parametrize(("lost", "decided"), [(12, True), (2, False)])
def test_the_keepalive_above_the_balancer_comes_from_the_race_study(
    lost: int, decided: bool
) -> None:
    """gunicorn-gevent leads behind the ALB-like front; its race lost `lost` of 480 requests
    at its default keep-alive (2 s) and none of 480 at 65 s. The exact test (the study
    section's, bench.report.keepalive) is two-sided: twice the hypergeometric tail
    C(480, k)/C(960, k) for k 502s in all: 12 give 0.0004 (decided: the line to paste
    carries --keep-alive 65), 2 give 0.50 (not decided: the default stays)."""
    p = 2 * math.comb(480, lost) / math.comb(960, lost)
    assert (p < 0.05) is decided
    base = replace(_base(), concurrency=50, proxy="alb")
    gevent = {"workers": 2, "connections": 1000, "keepalive": 2}
    records = [
        *_trials(base, "gunicorn-gevent", gevent, SEPARATED[0]),
        *_trials(base, "gunicorn-sync", {"workers": 2, "backlog": 2048}, SEPARATED[1]),
        _race(base, 2, lost, 480),
        _race(base, 65, 0, 480),
    ]
    recs, _ = recommendations(records)
    alb = next(r for r in recs if r.deployment == "behind the ALB-like front")
    assert alb.server == "gunicorn-gevent"
    assert f"exact test, adjusted p = {p:.3f}" in alb.checks
    assert ("--keep-alive 65" in alb.command) is decided
    assert ("--keep-alive 2" in alb.command) is not decided


def test_an_undecided_row_behind_the_balancer_names_each_race_and_why() -> None:
    """Two configurations tied behind the ALB-like front: the row says why it is undecided,
    then each candidate's race under its server's name (the reference's row listed four
    servers' counts with no name, and dropped why it was undecided)."""
    base = replace(_base(), concurrency=50, proxy="alb")
    records = [
        *_trials(
            base,
            "gunicorn-gevent",
            {"workers": 2, "connections": 1000, "keepalive": 2},
            [20_000.0, 12_000.0, 16_000.0],
        ),
        *_trials(
            base, "gunicorn-sync", {"workers": 2, "backlog": 2048}, [15_000.0, 19_000.0, 14_000.0]
        ),
        _race(base, 2, 12, 480),
        _race(base, 65, 0, 480),
    ]
    recs, _ = recommendations(records)
    alb = next(r for r in recs if r.deployment == "behind the ALB-like front")
    assert alb.server is None
    assert alb.evidence.startswith("leaders' intervals overlap: ")
    assert "gunicorn-gevent: race: 12 502s in 480 requests at its default keep-alive" in (
        alb.evidence
    )
    assert "gunicorn-sync: keep-alive race not measured for gunicorn-sync" in alb.evidence


def test_a_workload_never_measured_in_a_deployment_has_no_row_behind_the_balancer() -> None:
    """The race ran, and the slow upstream workload ran only inside a study (never ranked): no
    "behind the ALB-like front" row for it, whose only evidence would be "no run" (the
    reference's row counted against the rows that decide); it is listed as not measured,
    with the command that measures it."""
    base = replace(_base(), concurrency=50)
    study = {**base.metadata, "study": "sync-vs-async-p99", "study_arm": "a", "study_run": "r1"}
    records = [
        *_trials(base, "gunicorn-gevent", {"workers": 2, "connections": 1000}, SEPARATED[0]),
        *_trials(base, "gunicorn-sync", {"workers": 2, "backlog": 2048}, SEPARATED[1]),
        replace(base, scenario="sleep", run_id="sleep" * 8, metadata=study),
        _race(replace(base, proxy="alb"), 2, 12, 480),
        _race(replace(base, proxy="alb"), 65, 0, 480),
    ]
    recs, missing = recommendations(records)
    assert [(r.workload, r.deployment) for r in recs] == [
        ("light CPU", "direct"),
        ("light CPU", "behind the ALB-like front"),
    ]
    assert (
        "slow upstream behind the ALB-like front (`make bench SERVER=granian,gunicorn-gevent "
        "SCENARIO=sleep TRIALS=auto PROXY=alb`)" in (missing[host_of(base)])
    )


def test_runs_under_a_cpu_quota_make_their_own_deployment() -> None:
    """Runs with a cgroup CPU quota are ranked only among themselves: they give the 'under a
    CPU quota' recommendation and none of the direct one, which is left to measure."""
    base = replace(_base(), concurrency=50, cgroup={"cpu_quota": 1.0})
    records = [
        *_trials(base, "granian", {"workers": 1, "threads": 4, "backlog": 1024}, SEPARATED[0]),
        *_trials(base, "gunicorn-sync", {"workers": 1, "backlog": 2048}, SEPARATED[1]),
    ]
    recs, missing = recommendations(records)
    quota = [r for r in recs if r.deployment == "under a CPU quota"]
    assert [r.server for r in quota] == ["granian"]
    assert not any(r.deployment == "direct" for r in recs)
    assert [m for m in missing[host_of(base)] if m.startswith("light CPU direct")] == [
        "light CPU direct (`make bench SERVER=granian,gunicorn-sync SCENARIO=plaintext "
        "TRIALS=auto`)"
    ]


def test_the_balancer_idle_timeout_is_read_from_the_template() -> None:
    """60 s, the ALB's default, as proxy/alb.conf.template's upstream block sets it (the
    block holds `${APP_SERVER}`'s brace before its own: a first-brace read found nothing, and
    every race arm counted as 'longer', so the keep-alive rule never fired)."""
    template = (ROOT / "proxy" / "alb.conf.template").read_text()
    upstream = template.split("upstream app {", 1)[1].split("\n}", 1)[0]
    assert "keepalive_timeout 60s;" in upstream
    assert balancer_idle_s() == 60


def _session(records: list[Record], session: str, **meta: object) -> list[Record]:
    """The records as one harness invocation's (metadata.session_id), with extra metadata."""
    return [
        replace(
            r, run_id=f"{session}{r.run_id}", metadata={**r.metadata, "session_id": session, **meta}
        )
        for r in records
    ]


GRANIAN = {"workers": 2, "threads": 4, "backlog": 1024}


def test_a_make_bench_session_is_preferred_to_make_tunes_search() -> None:
    """make bench separated granian w2 t4 from gunicorn-sync (3 trials); make tune's search on
    the same machine and load ran granian at two knob sets and gunicorn-sync at one, 2 trials
    each, granian w4 separated ahead of w2. The bench session answers (granian w2 t4); the
    search's arena neither adds a second winner nor beats the bench leader (both left the row
    undecided). The search alone
    (one server's knobs against each other) chooses no server."""
    base = replace(_base(), concurrency=50)
    bench = _session(_arena(*SEPARATED), "bench")
    search = _session(
        [
            *_trials(base, "granian", GRANIAN, [20_000.0, 20_010.0]),
            *_trials(base, "granian", {**GRANIAN, "workers": 4}, [30_000.0, 30_010.0]),
            *_trials(base, "gunicorn-sync", {"workers": 4}, [6_000.0, 6_010.0]),
        ],
        "search",
        tune={"objective": "rps"},
    )
    assert _direct(search).server == "granian"  # the search alone still answers
    alone = _direct(search[:4])  # one server's knob sets alone choose no server
    assert alone.server is None and "only granian measured" in alone.evidence
    direct = _direct([*bench, *search])
    assert direct.server == "granian" and direct.knobs == GRANIAN
    assert "rank 1 of 2 by req/s" in direct.evidence


def test_a_leader_never_measured_beside_another_configuration_is_not_recommended() -> None:
    """Session A separates granian from gunicorn-sync; session B measured uvicorn and
    hypercorn (tied) on the same machine and workload, never beside granian: no
    recommendation, the reason said, and the command names granian with B's leaders."""
    base = replace(_base(), concurrency=50)
    a = _session(_arena(*SEPARATED), "a")
    b = _session(
        [
            *_trials(base, "uvicorn", {"workers": 2}, TIED[0]),
            *_trials(base, "hypercorn", {"workers": 2}, TIED[1]),
        ],
        "b",
    )
    assert _direct(a).server == "granian"
    direct = _direct([*a, *b])
    assert direct.server is None
    assert "never measured beside" in direct.evidence
    named = set(direct.command.split("SERVER=")[1].split()[0].split(","))
    assert {"granian", "uvicorn", "hypercorn"} <= named


def test_a_starved_leader_is_never_recommended() -> None:
    """granian separated ahead of gunicorn-sync by req/s but serving 16 % of its connections
    (Little's law: 0.4 ms × 20,000 req/s / 50): never recommended, the reason said; served,
    it is recommended."""

    def arena(mean_ms: float) -> list[Record]:
        records = _arena(*SEPARATED)
        return [
            replace(r, latency_ms={**(r.latency_ms or {}), "mean": mean_ms})
            if r.server == "granian"
            else replace(r, latency_ms={**(r.latency_ms or {}), "mean": 8.4})
            for r in records
        ]

    assert _direct(arena(2.5)).server == "granian"
    starved = _direct(arena(0.4))
    assert starved.server is None
    assert "left connections unserved" in starved.evidence


def test_a_run_command_always_names_two_servers_or_more() -> None:
    """Under a CPU quota only gunicorn-sync was measured (w1 and w5, tied): the command that
    would decide names another server of the machine's workload (granian, measured direct),
    never gunicorn-sync alone."""
    quota = replace(_base(), concurrency=10, cgroup={"cpu_quota": 1.0})
    records = [
        *_arena(*SEPARATED),
        *_trials(quota, "gunicorn-sync", {"workers": 1, "backlog": 2048}, TIED[0]),
        *_trials(quota, "gunicorn-sync", {"workers": 5, "backlog": 2048}, TIED[1]),
    ]
    recs, _ = recommendations(records)
    (row,) = [r for r in recs if r.deployment == "under a CPU quota"]
    assert row.server is None
    assert row.command.split("SERVER=")[1].split()[0] == "gunicorn-sync,granian"


def test_a_quota_not_measured_yet_is_asked_for_at_a_quota_that_binds() -> None:
    """Only direct runs: the line naming what is not measured yet asks for the workload under
    a 0.5-CPU quota (it asked for CPU_QUOTA=1, which does not bind on 2 CPUs: issue 22)."""
    _, missing = recommendations(_arena(*SEPARATED))
    (machine,) = missing
    quota = [m for m in missing[machine] if m.startswith("light CPU under a CPU quota")]
    assert len(quota) == 1 and quota[0].endswith(" CPU_QUOTA=0.5`)"), quota


def test_what_is_not_measured_yet_is_asked_of_every_server_measured_for_the_workload() -> None:
    """The line naming a deployment not measured yet races the servers the machine measured
    for that workload, fastest first (`make bench SCENARIO=plaintext CPU_QUOTA=0.5` alone
    measured granian, the one default server: a row of one server, which decides nothing);
    the baseline nginx-static, fastest of all, is not one of them."""
    _, missing = recommendations(_arena(*SEPARATED))
    (machine,) = missing
    (quota,) = [m for m in missing[machine] if m.startswith("light CPU under a CPU quota")]
    assert quota == (
        "light CPU under a CPU quota (`make bench SERVER=granian,gunicorn-sync "
        "SCENARIO=plaintext TRIALS=auto CPU_QUOTA=0.5`)"
    )


def test_avoid_names_another_server_never_the_same_servers_other_knobs() -> None:
    """Under a CPU quota gunicorn-sync w5 is 5× gunicorn-sync w1 on a sleeping route (its
    workers' arithmetic, not a finding about a server): no "avoid" line from it; with
    uvicorn also measured there and separated behind, uvicorn is the one to avoid."""
    quota = replace(_base(), concurrency=10, cgroup={"cpu_quota": 1.0})
    w5 = _trials(quota, "gunicorn-sync", {"workers": 5, "backlog": 2048}, [50.0, 49.0, 48.0])
    w1 = _trials(quota, "gunicorn-sync", {"workers": 1, "backlog": 2048}, [10.0, 10.1, 9.9])

    def row(records: list[Record]) -> object:
        recs, _ = recommendations(records)
        return next(r for r in recs if r.deployment == "under a CPU quota")

    assert row([*w5, *w1]).avoid == "–"
    slow = _trials(quota, "uvicorn", {"workers": 1, "backlog": 2048}, [20.0, 20.2, 19.8])
    assert row([*w5, *w1, *slow]).avoid.startswith("uvicorn w1 b2048: 20 vs 49 req/s")


def test_a_run_command_names_every_server_the_row_compares() -> None:
    """Six servers tied at c50 (the same req/s series, shuffled): the row is undecided and
    its command names all six, not the first four."""
    base = replace(_base(), concurrency=50)
    servers = ["granian", "uwsgi", "meinheld", "uvicorn", "gunicorn-sync", "hypercorn"]
    series = [[15_000.0, 19_000.0, 14_000.0], [16_000.0, 12_000.0, 20_000.0]]
    records = [
        rec
        for i, server in enumerate(servers)
        for rec in _trials(base, server, {"workers": 2}, series[i % 2])
    ]
    direct = _direct(records)
    assert direct.server is None
    assert set(direct.command.split("SERVER=")[1].split()[0].split(",")) == set(servers)


# -- raced loads: the race's read-out decides (tests/fixtures/race-direct: the reference's
# direct race of 2026-11-26 on /plaintext at c10 and c50, 3 rounds of 2 slices, its 13
# servers and 2 baselines)


def _raced() -> list[Record]:
    records, _ = load_records(FIXTURES / "race-direct")
    assert records and all(r.metadata.get("trials_auto") for r in records)
    return records


def test_a_raced_workload_recommends_its_leading_group_never_a_starved_server() -> None:
    """The race put the slow tail below the leaders at both loads: the row recommends the
    best of the configurations among the leaders at every load (not one that left
    connections unserved), names the others beside it and the command that would race them
    apart (naming each of them); without the screen's evidence (the first 2 rounds only, no
    decision possible) the same row is "not enough evidence".

    Since issue 57 the screen puts a configuration out only when its own paired test against
    the best separates it too, and 3 paired rounds (df = 2, the fixture's race) separate
    nothing at a 12-server race's levels: the fixture's full race now recommends nothing
    either, and says which command would decide it. The checks below the early return keep
    the recommendation's rules for a race that did screen (a new fixture will need 5 or
    more rounds)."""
    records = _raced()
    row = _direct(records)
    if row.server is None:
        assert "CONCURRENCY=10,50 TRIALS=auto BUDGET=" in row.command, row.command
        return
    starved_servers = {
        key[0]
        for key, group in groups([r for r in records if r.server not in BASELINES]).items()
        if starved(group)
    }
    assert row.server not in starved_servers and not set(row.tied) & starved_servers
    arenas_ = arenas(deployment_runs(records, host_of(records[0]), ("plaintext", "json"), "direct"))
    assert len(arenas_) == 2 and all(a.race is not None and a.separated_some() for a in arenas_)
    for arena in arenas_:
        leaders = {arena.members[k][0].server for k in arena.leaders()}
        assert row.server in leaders or row.server in starved_servers
    # a configuration ranked apart for unserved connections is named, with its loads: the
    # row leaves it out (uwsgi, among the c10 leaders, served under half its connections at c50)
    starved_at = {
        (g[0].server, g[0].concurrency)
        for a in arenas_
        for g in a.members.values()
        if starved(g) and g[0].server != row.server
    }
    assert starved_at
    _, apart = row.evidence.split("ranked apart, never recommended: ")
    for server, load in starved_at:
        assert re.search(rf"(^|; ){server} [^;]* at (c\d+, )*c{load}\b", apart), apart
    # every leader at a load is named there: the row's own evidence, with the others beside it
    for arena in arenas_:
        names = [arena.labels[k] for k in arena.leaders()]
        if len(names) > 1 and row.server in {arena.members[k][0].server for k in arena.leaders()}:
            assert all(n in row.evidence for n in names), (names, row.evidence)
    if row.tied:
        command = re.search(r"`(make bench SERVER=[^`]*)`", row.evidence)
        assert command is not None, row.evidence
        named = set(command.group(1).split("SERVER=")[1].split()[0].split(","))
        assert named == {row.server, *(t.split()[0] for t in row.tied)}
        assert "TRIALS=auto BUDGET=" in command.group(1)
    early = [r for r in records if r.trial <= 2]
    undecided = _direct(early)
    assert undecided.server is None
    # the command races the leaders again at the loads raced, as long as their noise needs
    assert "CONCURRENCY=10,50 TRIALS=auto BUDGET=" in undecided.command, undecided.command


def test_a_configuration_the_race_found_equivalent_is_named_so_with_no_command() -> None:
    """tests/fixtures/race-quota-upstream: the reference's quota-upstream race (Intel Xeon,
    2026-11-28: 5 servers on /upstream c10 under a 0.5-CPU quota, decided in 7 rounds:
    gunicorn-gevent = uvicorn (±5 %) > granian > gunicorn-gthread > gunicorn-sync). The row
    recommends the best of the two and names the other as equivalent within ±5 %; it offers
    no command to race them apart (the race decided their pair: the row said "not separated
    from uvicorn" and a BUDGET=5 race that could only find them equal again)."""
    records, _ = load_records(FIXTURES / "race-quota-upstream")
    recs, _ = recommendations(records)
    (row,) = [r for r in recs if r.deployment == "under a CPU quota"]
    assert row.workload == "slow upstream"
    assert {row.server, *(e.split()[0] for e in row.equal)} == {"gunicorn-gevent", "uvicorn"}
    assert row.tied == () and row.equal_margin == pytest.approx(0.05)
    assert "equivalent to it within ±5 % at every load it raced them" in row.evidence
    assert "race them apart" not in row.evidence and "make bench" not in row.evidence
    cells = _row(row)
    assert "; equivalent (±5 %) to uvicorn" in cells[2] and "not separated" not in cells[2]


def test_a_raced_row_judges_as_the_decided_by_racing_lines_say() -> None:
    """One decision per question: the leaders the recommendation reads are the race's own
    (bench.report.standings.judge_point over the same runs, starved ones apart)."""
    records = _raced()
    for arena in arenas(deployment_runs(records, host_of(records[0]), ("plaintext",), "direct")):
        runs = [r for g in arena.members.values() if not starved(g) for r in g]
        race = standings.judge_point(runs)
        assert race is not None and arena.race is not None
        assert race.standing.line() == arena.race.standing.line()
        assert [arena.labels[k] for k in arena.leaders()] == list(race.standing.leaders())


def test_one_servers_knobs_against_each_other_choose_no_server() -> None:
    """Under a CPU quota only gunicorn-sync was measured, w5 well ahead of w4 and w3 on a
    sleeping route (the reference's row: 1.25× and 1.67×, which are 5/4 and 5/3, one sync
    worker per sleeping request): no server is recommended from its own knobs; the row says
    why, names the quota in its evidence, and its command names a second server and the
    quota the runs had (it said CPU_QUOTA=1, a quota that does not bind on 2 CPUs)."""
    quota = replace(_base(), concurrency=10, cgroup={"cpu_quota": 0.5})
    records = [
        *_arena(*SEPARATED),
        *_trials(quota, "gunicorn-sync", {"workers": 5, "backlog": 2048}, [5e3, 4.9e3, 4.8e3]),
        *_trials(quota, "gunicorn-sync", {"workers": 4, "backlog": 2048}, [4e3, 3.95e3, 4.02e3]),
        *_trials(quota, "gunicorn-sync", {"workers": 3, "backlog": 2048}, [3e3, 2.95e3, 3.02e3]),
    ]
    recs, _ = recommendations(records)
    (row,) = [r for r in recs if r.deployment == "under a CPU quota"]
    assert row.server is None and row.avoid == "–"
    assert "only gunicorn-sync measured" in row.evidence
    assert "not a choice of server" in row.evidence
    assert row.command.split("SERVER=")[1].split()[0] == "gunicorn-sync,granian"
    assert row.command.endswith(" CPU_QUOTA=0.5")  # the quota measured, not a 1-CPU one
    slow = _trials(quota, "uvicorn", {"workers": 1, "backlog": 2048}, [2_000.0, 2_020.0, 1_980.0])
    recs, _ = recommendations([*records, *slow])
    (row,) = [r for r in recs if r.deployment == "under a CPU quota"]
    assert row.server == "gunicorn-sync" and row.knobs["workers"] == 5
    assert "c10 (wrk, 0.5-CPU quota)" in row.evidence


def test_a_studys_search_runs_make_no_row() -> None:
    """make tune's search of a study's tuned arm (metadata.study_search, without `study` so
    that the study's verdict never judges it) is the study's data: no recommendation row of
    its own, and no "not enough evidence" row (workers-threads-tuned's searches made three
    on the AMD machine)."""
    base = replace(_base(), concurrency=16, scenario="upstream")
    meta = {**base.metadata, "study_search": "workers-threads-tuned", "tune": {"x": 1}}
    searched = replace(base, metadata=meta)
    records = [
        *_arena(*SEPARATED),
        *_trials(searched, "gunicorn-gevent", {"workers": 1, "connections": 1000}, [29.0] * 3),
        *_trials(searched, "gunicorn-sync", {"workers": 4}, [7.0, 7.1, 7.2]),
    ]
    recs, _ = recommendations(records)
    assert {r.workload for r in recs} == {"light CPU"}
    assert recommendations(_arena(*SEPARATED))[0] == recs
