"""Capacity comparisons by the race engine (bench.report.capacities), over the real-shaped
fixture tests/fixtures/capacity-pair (/sleep at p99 <= 100 ms, 3 trials of one rate ladder
each: gunicorn-sync's searches a and c at 80/90/100 req/s with the same verdicts, granian's
search b at 160/180/200 req/s, exactly twice gunicorn-sync's), variants of it built with
dataclasses.replace, and the reference records (results/reference/records).

Expected values by hand: a trial passing 80 and 90 and failing 100 crosses 1/2 halfway on
log rate, sqrt(90 × 100) = 94.87 req/s; one passing only 80 crosses at sqrt(80 × 90) = 84.85.
granian's trials are those × 2, so its ratio to gunicorn-sync is 2.00 in every round: no
spread, undecided (never "p = 0"). Moving granian's trial 2 ladder up 10 % and its trial 3
down 5 % gives ln ratios ln 2 + (0, ln 1.1, ln 0.95): paired t with df 2, mean 0.7078, sd
0.0744, t = 16.5, p = 0.0037 < 0.05 (one pair, one look at 3 rounds spends all of α):
separated.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest
from scipy import stats

from bench.core import defaults, plan
from bench.core.record import Record, load_records
from bench.harness import racing
from bench.report import capacities, decision
from bench.report.glance import glance_section
from bench.report.openloop import IDLE_KNEE_CPU_PCT, open_loop_sections
from bench.report.recommend import recommendations

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "capacity-pair"
REFERENCE = ROOT / "tests" / "fixtures" / "reference-2026-11" / "records"
SHIFT = {1: 1.0, 2: 1.1, 3: 0.95}  # granian's ladder per trial in the separated variant


def _fixture(searches: str = "abc") -> list[Record]:
    records, bad = load_records(FIXTURE)
    assert bad == [] and len(records) == 27
    return [r for r in records if r.metadata["capacity"]["search"][0] in searches]


def _shifted(records: list[Record]) -> list[Record]:
    """granian's rates moved per trial (SHIFT): the ratio varies from round to round."""
    return [
        replace(r, offered_rps=r.offered_rps * SHIFT[r.trial]) if r.server == "granian" else r
        for r in records
    ]


def _capacity_lines(records: list[Record]) -> list[str]:
    return [line for line in glance_section(records) if line.startswith("- Capacity at")]


def test_each_rounds_capacity_is_the_crossing_of_its_own_steps() -> None:
    """Trial by trial: 94.87, 94.87, 84.85 req/s for gunicorn-sync; twice that for granian."""
    (race,) = capacities.races(_fixture("ab"))
    low, high = math.sqrt(80 * 90), math.sqrt(90 * 100)
    assert race.entrants["gunicorn-sync"].rounds == pytest.approx({1: high, 2: high, 3: low})
    assert race.entrants["granian"].rounds == pytest.approx({1: 2 * high, 2: 2 * high, 3: 2 * low})


def test_the_same_ratio_every_round_stays_undecided() -> None:
    """2.00× in every round (the float ln ratios differ by ~1e-16): no spread to test, so the
    race says undecided, never separated at "p = 0"; the glance line says so."""
    (race,) = capacities.races(_fixture("ab"))
    (pair,) = race.pairs()
    assert (pair.better, pair.worse, pair.state) == ("granian", "gunicorn-sync", "undecided")
    assert pair.reason == "the same ratio every round: no spread to test"
    assert race.leader() is None
    (line,) = _capacity_lines(_fixture("ab"))
    assert "undecided (the same ratio every round" in line and "granian ? gunicorn-sync" in line


def test_a_ratio_that_varies_by_round_is_separated_by_the_paired_test() -> None:
    """granian's ladder moved per round: separated at p = 0.0037 (the docstring's t-test)."""
    (race,) = capacities.races(_shifted(_fixture("ab")))
    (pair,) = race.pairs()
    diffs = [math.log(2 * SHIFT[t]) for t in (1, 2, 3)]
    expected = stats.ttest_1samp(diffs, 0.0).pvalue
    assert expected == pytest.approx(0.0037, abs=1e-4)
    assert pair.state == "separated" and pair.p == pytest.approx(expected)
    assert pair.ratio == pytest.approx(math.exp(sum(diffs) / 3))
    assert race.leader().label == "granian" and race.beaten("gunicorn-sync")
    (line,) = _capacity_lines(_shifted(_fixture("ab")))
    assert ": separated; paired by round, decided in 3 round(s): granian > gunicorn-sync." in line


def test_a_configuration_is_never_compared_with_its_own_second_search() -> None:
    """gunicorn-sync searched twice in one session (a and c): one configuration whose rounds
    pool both searches' steps, nothing to compare (the old line said 1.00× [0.80–1.25])."""
    (race,) = capacities.races(_fixture("ac"))
    assert race.race is None and list(race.entrants) == ["gunicorn-sync"]
    assert race.entrants["gunicorn-sync"].capacity.trials_at_knee == 18
    (line,) = _capacity_lines(_fixture("ac"))
    assert line.endswith("(the only configuration searched here: nothing to compare).")
    assert "×" not in line


def _elsewhere(records: list[Record], server: str, **meta) -> list[Record]:
    return [
        replace(r, metadata={**r.metadata, **meta}) if r.server == server else r for r in records
    ]


def test_two_sessions_are_never_compared() -> None:
    """granian in a session of its own (another session id): two arenas of one configuration
    each, no ratio; on the same machine, each line names its session only if needed."""
    found = capacities.races(_elsewhere(_shifted(_fixture("ab")), "granian", session_id="s2"))
    assert len(found) == 2 and all(r.race is None for r in found)
    lines = _capacity_lines(_elsewhere(_shifted(_fixture("ab")), "granian", session_id="s2"))
    assert len(lines) == 2 and not any("×" in line for line in lines)


def test_a_capacity_is_shown_under_its_own_machines_heading() -> None:
    """granian measured on another machine (machine_id): its line sits under that machine's
    heading, gunicorn-sync's under its own, and neither is compared with the other."""
    other = _elsewhere(_shifted(_fixture("ab")), "granian", machine_id="feedbeef" * 4)
    text = glance_section(other)
    headings = [i for i, line in enumerate(text) if line.startswith("**vm")]
    assert len(headings) == 2
    for start, end in zip(headings, [*headings[1:], len(text)], strict=True):
        block = [line for line in text[start:end] if line.startswith("- Capacity at")]
        (line,) = block
        server = "granian" if "feed" in text[start] else "gunicorn-sync"
        assert f"**{server} " in line and "×" not in line


def test_a_container_limited_search_is_not_ranked_among_native_ones() -> None:
    """gunicorn-sync under docker --cpus=0.5 (a configuration's identity includes its limits):
    its own arena, labelled, not in granian's race."""
    box = {"cpus": 0.5, "memory_bytes": None, "network": "host"}
    limited = [
        replace(r, container=box) if r.server == "gunicorn-sync" else r
        for r in _shifted(_fixture("ab"))
    ]
    found = capacities.races(limited)
    assert len(found) == 2 and all(r.race is None for r in found)
    lines = _capacity_lines(limited)
    assert any("--cpus=0.5" in line and "gunicorn-sync" in line for line in lines), lines


def test_the_recommendation_follows_the_capacity_race() -> None:
    """The slow-upstream row: granian when the race separates it (its evidence names the
    paired ratio), none with the make capacity command while the race is undecided."""
    decided, _ = recommendations(_shifted(_fixture("ab")))
    (row,) = [r for r in decided if r.workload == "slow upstream" and r.deployment == "direct"]
    assert row.server == "granian"
    assert "rounds: separated): gunicorn-sync" in row.evidence
    tied, _ = recommendations(_fixture("ab"))
    (row,) = [r for r in tied if r.workload == "slow upstream" and r.deployment == "direct"]
    assert row.server is None
    assert row.command == "make capacity SERVER=granian,gunicorn-sync SCENARIO=sleep"


def test_the_reference_compares_capacities_only_within_a_session() -> None:
    """results/reference: the Intel host's two sessions each race granian against
    gunicorn-sync (granian never against itself: "3,633 vs 3,566" were two sessions); the
    single-trial AMD searches decide nothing (1 paired round), so no capacity recommends
    granian there."""
    records, _ = load_records(REFERENCE)
    found = capacities.races(records)
    for race in found:
        assert len({e.record.server for e in race.entrants.values()}) == len(race.entrants)
    intel = [r for r in found if "Intel" in r.machine]
    assert len(intel) == 2
    assert all(r.race.standing.line() == "granian > gunicorn-sync" for r in intel)
    amd = [r for r in found if "v595" in r.machine]
    assert {r.scenario for r in amd} == {"db", "plaintext"}
    assert all(r.pairs()[0].reason == "1 paired round(s), 3 needed" for r in amd)
    rows, _ = recommendations(records)
    light = [r for r in rows if "v595" in r.machine and r.workload == "light CPU"]
    assert light and all("capacity" not in r.evidence for r in light)


def test_a_knee_at_an_idle_server_is_flagged_not_ranked(tmp_path: Path) -> None:
    """Issue 32 item 3: nginx-static failed p99 <= 50 ms at ~16k req/s at 18 % of one CPU
    (the VM's jitter, not its limit). Raced with the harness's baselines, it is kept apart
    (CapacityRace.unranked) with its CPU at the knee; the servers that were busy at theirs
    (granian, gunicorn-sync: over half a CPU) are raced as before; the capacity table marks
    its row, the harness's own race (point_races) is unchanged."""
    records, _ = load_records(REFERENCE)
    found = capacities.races(records, baselines=True)
    plain = next(r for r in found if "v595" in r.machine and r.scenario == "plaintext")
    assert list(plain.unranked) == ["nginx-static"]
    idle = plain.unranked["nginx-static"]
    assert idle.knee_cpu_pct is not None and idle.knee_cpu_pct < IDLE_KNEE_CPU_PCT
    assert "nginx-static" not in {e.label for e in plain.ranking()}
    assert all(not e.idle_knee for r in found for e in r.entrants.values())
    assert all(
        e.knee_cpu_pct is not None and e.knee_cpu_pct > IDLE_KNEE_CPU_PCT
        for r in found
        for e in r.entrants.values()
    )
    raced = capacities.point_races(records, 3)
    assert any("nginx-static" in race.figures for race in raced)
    table = "\n".join(open_loop_sections(records, tmp_path))
    row = next(line for line in table.splitlines() if line.startswith("| nginx-static |"))
    assert f"⚐ knee at {idle.knee_cpu_pct:.0f} % CPU" in row
    assert "⚐: the objective failed while the server was idle" in table
    granian = next(line for line in table.splitlines() if line.startswith("| granian |"))
    assert "⚐" not in granian


def test_float_rounding_is_no_spread() -> None:
    """decision: ln ratios equal up to float rounding are the same ratio (was `sd == 0`)."""
    figures = {"a": {1: 189.73665961010263, 2: 189.73665961010263, 3: 169.70562748477138}}
    figures["b"] = {1: 94.8683298050514, 2: 94.8683298050514, 3: 84.85281374238568}
    standing = decision.judge(figures, look=3, max_looks=3)
    assert standing.pairs[0].state == "undecided"
    assert standing.pairs[0].reason.startswith("the same ratio every round")


def _options(servers: tuple[str, ...], budget_s: int) -> plan.Options:
    mode = plan.Mode(objective=plan.Objective(p99_ms=100))
    options = plan.Options(
        servers=servers,
        scenarios=("sleep",),
        concurrency=(),
        rates=(50,),
        duration_s=5,
        warmup_s=1,
        trials=3,
        arch="amd64",
        results=Path("/nonexistent"),
        overrides={},
        load_threads=1,
        seed=1,
        mode=mode,
        precision=plan.Precision(budget_s=budget_s),
    )
    return racing.with_looks(options)


def _race(ratio_by_round, budget_s: int = 3_600, round_s: float = 60.0):
    """make capacity's race loop over the fixture's steps: round t of a server repeats its
    trial-((t - 1) % 3 + 1) steps, granian's rates × ratio_by_round(t); `round_s` a round."""
    base = _fixture("ab")
    recs: list[Record] = [
        replace(r, offered_rps=r.offered_rps * ratio_by_round(r.trial))
        if r.server == "granian"
        else r
        for r in base
    ]
    said: list[str] = []
    clock = [3 * round_s]

    def run_round(blocks: list[plan.Block]) -> bool:
        for block in blocks:
            for r in base:
                if r.server == block.server and r.trial == (block.trial - 1) % 3 + 1:
                    scale = ratio_by_round(block.trial) if r.server == "granian" else 1.0
                    recs.append(replace(r, trial=block.trial, offered_rps=r.offered_rps * scale))
        clock[0] += round_s
        return True

    opts = _options(("granian", "gunicorn-sync"), budget_s)
    metadata = {"trials_auto": opts.precision.to_dict()}
    recs[:] = [replace(r, metadata={**r.metadata, **metadata}) for r in recs]
    outcome = racing.race(opts, lambda: recs, run_round, said.append, lambda: clock[0])
    return outcome, said, opts


def test_make_capacity_trials_auto_races_the_capacities_until_decided() -> None:
    """A ratio varying by round is decided by the race loop (bench.harness.racing with the
    capacity judge): the standings after each round, the closing line in the race's words."""
    outcome, said, opts = _race(lambda t: 1.0 + 0.03 * ((t * 7) % 5 - 2))
    assert opts.precision.max_looks == 3_600 // (7 * 2 * 6)  # 2 servers' 7 knee steps of 6 s
    assert outcome.why == "decided", said
    assert outcome.lines[0].startswith("capacity at p99 ≤ 100 ms, sleep: decided in ")
    assert outcome.lines[0].endswith("granian > gunicorn-sync")
    assert said[0].startswith("TRIALS=auto round 3: capacity at p99 ≤ 100 ms, sleep:")


def test_an_undecided_capacity_race_ends_with_the_make_capacity_command() -> None:
    """The same 2.00× every round never decides: at 100 s a round, a 450 s budget (5 looks
    of 84 s) runs a 4th round, not a 5th; the race stops there and names the make capacity
    command (its objective and start) that would race on."""
    outcome, said, _ = _race(lambda t: 1.0, budget_s=450, round_s=100.0)
    assert outcome.why == "budget" and outcome.rounds == 4, said
    assert outcome.lines[-1].startswith("undecided after 4 round(s) (budget): granian, gunicorn")
    assert (
        "make capacity SERVER=granian,gunicorn-sync SCENARIO=sleep SLO_P99_MS=100 RATE=50 "
        in (outcome.lines[-1])
    )
    assert "TRIALS=auto BUDGET=" in outcome.lines[-1]


def test_the_knee_round_past_the_planned_trials_is_shuffled_afresh() -> None:
    """Trial 4 of a race: the ladder's rates in an order of its own; the planned rows kept."""
    from bench.harness.capacity import Knee, knee_ladder, knee_round

    ladder = knee_ladder(1000, seed=int("ab" * 6, 16), rounds=3)
    knee = Knee("ab" * 6, 1000, ladder, 20)
    assert [knee_round(knee, t) for t in (1, 2, 3)] == ladder
    later = [knee_round(knee, t) for t in range(4, 9)]
    rates = sorted({round(1000 * f) for f in defaults.CAPACITY_KNEE})
    assert all(sorted(row) == rates for row in later)
    assert len({tuple(row) for row in later}) > 1


@pytest.mark.parametrize(("truth", "reached"), [(1500, [1562]), (700, [640]), (1000, [])])
def test_a_round_that_all_passed_steps_on_until_one_fails(monkeypatch, truth, reached) -> None:
    """Trial 2 around a search result of 1,000 req/s on a server whose capacity is now
    `truth`: every ladder step passing (1,500) steps on at ×1.25 of 1,250 until one fails
    (1,562); every one failing (700) steps down at ×0.8 of 800 until one passes (640); a
    round with both verdicts (1,000) has its crossing and takes no extra step."""
    from types import SimpleNamespace

    from bench.harness import capacity as cap
    from tests.bench.test_capacity import _capacity_session

    steps: list[tuple[int, str]] = []

    def fake_step(session, template, rate, phase, number, search_id):
        steps.append((rate, phase))
        return rate <= truth

    monkeypatch.setattr(cap, "_step", fake_step)
    template = SimpleNamespace(server="s", scenario="db")
    ladder = cap.knee_ladder(1000, seed=1, rounds=3)
    knees = {("s", (("workers", 2),), "db"): cap.Knee("ab" * 6, 1000, ladder, 20)}
    assert cap.search_one(_capacity_session(3, 1000), template, 2, knees) == 1000
    assert steps[: len(ladder[1])] == [(r, "knee") for r in ladder[1]]
    assert steps[len(ladder[1]) :] == [(r, "knee") for r in reached]
