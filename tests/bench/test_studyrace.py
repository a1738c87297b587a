"""A study's checks judged by the race engine, and `make study TRIALS=auto` racing its arms.

Unit tests over crafted rounds (a shared round effect that only pairing removes; Holm over
the checks), over the shipped reference's real study records (one-trial studies say so; the
keep-alive race's fix is one decision for the section and the recommendations), and an
in-process race of a small study on the fake harness (a scripted req/s per server with a
per-round effect and seeded noise, a fake clock)."""

from __future__ import annotations

import json
import math
import random
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from bench.core import plan, studyfile
from bench.core.record import load_records, write_record
from bench.harness import run as harness_run
from bench.harness.recorder import Recorder
from bench.harness.session import Harness
from bench.host.placement import cpu_placement
from bench.report import keepalive, recommend, stats
from bench.report.decision import Pair, Question, judge_family
from bench.studies import runner, schema, sections, verdict
from bench.studies.arms import base_options
from bench.studies.metrics import latest_run
from tests.fakes import FakeSite, FakeTool, result

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "tests" / "fixtures" / "reference-2026-11"
FIXTURES = ROOT / "tests" / "fixtures"

# Each round a machine-wide effect of ±20 % moves both arms alike; a is 3 % below b, the
# run-to-run noise within a round is 0.5 %.
ROUND_EFFECT = [1.0, 1.25, 0.8, 1.15, 0.85, 1.2]
NOISE = [0.004, -0.003, 0.005, -0.004, 0.002, -0.005]


def _round_effect_series() -> tuple[list[float], list[float]]:
    a = [1000 * 0.97 * e * math.exp(n) for e, n in zip(ROUND_EFFECT, NOISE, strict=True)]
    b = [1000 * e * math.exp(-n) for e, n in zip(ROUND_EFFECT, NOISE, strict=True)]
    return a, b


def test_pairing_by_round_decides_what_the_unpaired_test_cannot() -> None:
    """3 % apart under a ±20 % round effect: the within-round ratios separate a below b,
    while the unpaired interval over the trials (the old rule, stats.decide) spans 1.00×:
    a check judged unpaired would stay inconclusive."""
    a, b = _round_effect_series()
    (pair,) = judge_family([Question("a", "b", dict(enumerate(zip(a, b, strict=True))))])
    assert pair.state == "separated" and pair.ratio < 1 and pair.high < 1
    assert 0.96 < pair.ratio < 0.98
    unpaired = stats.decide(b, a, "lower")
    assert unpaired.outcome == "inconclusive"
    assert unpaired.difference.low < 1 < unpaired.difference.high


def _records_of(values: dict[str, list[float]]) -> list:
    """Records of the sync-vs-gevent study's arms at 30 users, one per round, with these
    mean response times (seconds)."""
    rec = next(r for r in load_records(FIXTURES / "records")[0] if r.status == "ok")
    out = []
    for arm, series in values.items():
        for trial, seconds in enumerate(series, start=1):
            meta = {**rec.metadata, "study": "sync-vs-gevent", "study_arm": arm}
            latency = {**rec.latency_ms, "mean": seconds * 1000}
            out.append(
                replace(
                    rec,
                    metadata={**meta, "study_run": "r1"},
                    concurrency=30,
                    latency_ms=latency,
                    trial=trial,
                    run_id=f"{arm}{trial}",
                )
            )
    return out


def test_a_study_check_is_decided_on_the_rounds_not_the_trials_pooled() -> None:
    """The same series as a study check (sync's mean below gevent's): holds on the paired
    rounds, with the rounds it rests on in its line."""
    a, b = _round_effect_series()
    check = {"kind": "less", "metric": "mean_s", "a": {"arm": "sync"}, "b": {"arm": "gevent"}}
    records = _records_of({"sync": [x / 1000 for x in a], "gevent": [x / 1000 for x in b]})
    judged = verdict.outcome(check, records)
    assert judged.result == "reproduced", judged.line
    assert "a/b 0.97× [" in judged.line and "6 rounds paired, Holm over 1 check" in judged.line
    # shuffling one arm's rounds breaks the pairing: the round effect is noise again
    shuffled = _records_of({"sync": [x / 1000 for x in a[::-1]], "gevent": [x / 1000 for x in b]})
    assert verdict.outcome(check, shuffled).result == "inconclusive"


def test_a_checks_interval_that_bounds_nothing_says_so() -> None:
    """The shipped reference's recycle check read "a/b 0.23× [1.2e-10–443906318.71], 3
    rounds paired": an interval 1,000× wide or more is said as "too few rounds to bound it";
    a narrower one keeps its figures."""
    wide = Pair("a", "b", 0.23, 1.2e-10, 4.4e8, "undecided", 3, 0.9, sd=2.0, reason="x")
    check = {"kind": "less", "metric": "p99_ms"}
    question = Question("a", "b", pairs={1: (2.0, 9.0), 2: (2.1, 9.5), 3: (2.2, 9.7)})
    text = verdict.reason_text(check, question, wide, 2)
    assert text.startswith("a/b 0.23× (too few rounds to bound it), 3 rounds paired"), text
    narrow = replace(wide, low=0.11, high=0.48)
    assert verdict.reason_text(check, question, narrow, 2).startswith("a/b 0.23× [0.11–0.48]")


def test_holm_steps_down_over_the_checks() -> None:
    """Two checks of one family: the first (p ≈ 0.001) is held to alpha/2, the second
    (p ≈ 0.04) to alpha once the first is rejected — Holm decides both, where Bonferroni
    (alpha/2 each) would leave the second undecided; alone in a family of 3 the second is
    not decided."""
    rng = np.random.default_rng(4)

    def question(name: str, target_p: float) -> Question:
        # 8 rounds of ln ratios with a fixed spread, their mean set for a two-sided p
        from scipy.stats import t

        z = rng.normal(0, 1, 8)
        z = (z - z.mean()) / z.std(ddof=1) * 0.05
        mean = t.ppf(1 - target_p / 2, 7) * 0.05 / math.sqrt(8)
        return Question(
            name, "b", {r: (math.exp(mean + z[r]), 1.0) for r in range(8)}, margin=0.001
        )

    strong, weak = question("strong", 0.001), question("weak", 0.04)
    first, second = judge_family([strong, weak])
    assert first.state == second.state == "separated"
    assert second.p == pytest.approx(max(0.04, 2 * 0.001), rel=1e-6)
    assert 0.04 > 0.05 / 2  # Bonferroni would not have decided it
    (alone,) = judge_family([weak], family=3)
    assert alone.state == "undecided" and alone.p == pytest.approx(0.12, rel=1e-6)


def test_every_one_trial_study_of_the_reference_says_it_cannot_decide() -> None:
    """The shipped reference's one-trial runs (sync-vs-gevent, workers-threads, …): every
    check and the verdict read "one trial: cannot decide", never a verdict; its 3-trial
    runs (keepalive-timewait) are decided where the rounds part."""
    records, _ = load_records(REFERENCE)
    for name in ("sync-vs-gevent", "workers-threads", "recycle", "reload"):
        study = schema.load_study(name)
        mine = latest_run(records, name, tuple(a.id for a in study.arms))
        word, lines = verdict.judge(study, sections.collapse_groups(study, mine)[0])
        assert word == "one trial: cannot decide", name
        # reload's check on late arrivals: these records (format 15) kept none, so it is not
        # measured, and adds no evidence either way (the verdict stays "one trial")
        late = [line for line in lines if "answered late" in line]
        assert all("not measured" in line for line in late)
        assert all(
            line.endswith("— inconclusive: one trial: cannot decide")
            for line in lines
            if line not in late
        )
    study = schema.load_study("keepalive-timewait")
    mine = latest_run(records, "keepalive-timewait", tuple(a.id for a in study.arms))
    found = verdict.outcomes(study, mine)
    assert [o.held for o in found] == ["outside", "holds", "holds", "within"]
    assert all("3 rounds paired, Holm over 4 checks" in o.line for o in found)


def test_the_reference_race_pairs_no_fix_with_another_machines_default() -> None:
    """The reference's keep-alive race: most default arms ran on the AMD host, their fix arms
    on the Intel one (issue 32 item 4); only same-machine pairs are judged, and the study
    section and the recommendations give each server the same result."""
    records, _ = load_records(REFERENCE)
    found = keepalive.fixes(records)
    for fix in found.values():
        if fix.fixed is not None:
            assert fix.machine == keepalive.host_of(fix.fixed)
    moved = [f for f in found.values() if f.fix_elsewhere]
    assert moved and all(f.result == "inconclusive" and f.pair is None for f in moved)
    for machine in {f.machine for f in found.values()}:
        for server, race in recommend.races(records, machine).items():
            assert race.result == found[(machine, server)].result
    study = schema.load_study("lb-keepalive-race")
    text = "\n".join(sections.summary_sections(records))
    for fix in found.values():
        if fix.fixed is not None:
            row = next(line for line in text.splitlines() if line.startswith(f"- {fix.server},"))
            assert f"— {fix.result}:" in row
        elif fix.fix_elsewhere:
            assert f"its fix arm ran on {fix.fix_elsewhere}" in text
    assert study.name == keepalive.RACE_STUDY


STUDY = """
title = "A race of two checks"
source = "000_a12100bfbd571bdb.txt"
claim = "gunicorn-sync serves less than granian; uwsgi at most granian's"
differs = "in-process fakes"
metrics = ["rps"]

[run]
scenario = "db"
concurrency = [50]
duration = 1
warmup = 0

[[arm]]
id = "fast"
label = "granian"
server = "granian"

[[arm]]
id = "slow"
label = "gunicorn-sync"
server = "gunicorn-sync"

[[arm]]
id = "same"
label = "uwsgi"
server = "uwsgi"

[[check]]
kind = "less"
metric = "rps"
a = { arm = "slow" }
b = { arm = "fast" }
describe = "slow below fast"

[[check]]
kind = "at_most"
metric = "rps"
a = { arm = "same" }
b = { arm = "fast" }
describe = "same at most fast"
"""
RPS = {"granian": 1000.0, "gunicorn-sync": 500.0, "uwsgi": 990.0}
RUN_S = 20.0


def _race_study(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, budget_s: int
) -> tuple[list[dict], str]:
    """make study NAME=tiny TRIALS=auto on the fake harness: each round a shared effect
    (±10 %) and 1 % noise per run; the records and stderr."""
    (tmp_path / "studies").mkdir()
    (tmp_path / "studies" / "tiny.toml").write_text(STUDY)
    monkeypatch.setattr(studyfile, "STUDIES_DIR", tmp_path / "studies")
    state = tmp_path / "state"
    state.mkdir()
    monkeypatch.setattr("bench.harness.run.state_base", lambda: state)
    rng = random.Random(3)
    effect = {t: random.Random(t).uniform(0.9, 1.1) for t in range(200)}
    site, tool = FakeSite(), FakeTool()

    def step():
        trial = int(re.search(r"-t(\d+)", tool.measured[-1].out.name).group(1))  # type: ignore[union-attr]
        rate = RPS[site.started[-1]] * effect[trial] * rng.lognormvariate(0, 0.01)
        return result(requests=max(1, round(rate * 2)))

    tool.script = [step] * 10_000
    monkeypatch.setattr("bench.harness.run.clock", lambda: RUN_S * len(tool.measured))

    def harness(first, arms, table, run_dir, progress) -> Harness:
        recorder = Recorder({"hostname": "test"}, cpu_placement(False), tool, progress)
        return Harness(site, tool, recorder, table, run_dir, progress)

    def execute(options, sections_, race=None) -> int:
        return harness_run.execute(options, sections_, harness=harness, race=race)

    results = tmp_path / "results"
    rounds = plan.Precision(budget_s=budget_s)
    status = runner.execute_studies(
        ["tiny"],
        base_options(results, 5),
        None,
        execute,
        runner.sections_for(results),
        None,
        rounds,
    )
    assert status == 0
    paths = sorted((results / "records").glob("*.json"))
    return [json.loads(p.read_text()) for p in paths], ""


def test_make_study_trials_auto_races_until_every_check_is_decided(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """slow (0.5×) is separated from fast within the first rounds and leaves; same (0.99×)
    races on with fast until it is equivalent within ±5 % (at most: holds); a progress line
    per round, a closing line per check, and the summary's section says the run was raced
    and what it decided."""
    records, _ = _race_study(tmp_path, monkeypatch, 3_600)
    err = capsys.readouterr().err
    rounds: dict[str, int] = {}
    for rec in records:
        arm = rec["metadata"]["study_arm"]
        rounds[arm] = max(rounds.get(arm, 0), rec["trial"])
    assert rounds["slow"] < rounds["same"] == rounds["fast"], (rounds, err[-1500:])
    assert all(r["metadata"]["trials_auto"]["max_looks"] for r in records)
    assert "TRIALS=auto round 3: " in err and "check(s) decided" in err
    assert "study race stopped (decided)" in err
    closing = err.strip().splitlines()[-2:]
    assert closing[0].startswith("tiny: decided in 3 rounds: slow below fast: ")
    assert closing[1].startswith(f"tiny: decided in {rounds['same']} rounds: same at most fast")
    assert "a = b within ±5 %" in closing[1]
    section = (tmp_path / "results" / "details" / "studies.md").read_text()
    assert "**Verdict: reproduced**" in section and "raced (TRIALS=auto" in section
    summary = (tmp_path / "results" / "summary.md").read_text()
    assert "- Study tiny — A race of two checks: **reproduced**." in summary


def test_make_study_trials_auto_stops_at_the_budget_saying_what_is_undecided(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A budget of 4 rounds (each round of the three arms costs 60 s on the fake clock): the
    race stops there, and the undecided check's closing line says so."""
    records, _ = _race_study(tmp_path, monkeypatch, 4 * 60)
    err = capsys.readouterr().err
    assert "study race stopped (budget)" in err or "study race stopped (limit)" in err, err
    assert max(r["trial"] for r in records) <= 4
    assert "tiny: undecided: same at most fast: " in err


def test_a_study_round_of_the_arms_left_is_costed_by_their_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """slow is decided in the first 3 rounds (60 s each: three arms at 20 s a run, after a
    warm-up start of each); the rounds after them race fast and same alone, 40 s. With 70 s
    of the budget left after the first rounds a 4th round runs (and decides same); costed
    as the mean round before it (80 s, the warm-up included) it did not, and the recycle
    study's 24 arms spent its budget on their first rounds for 2 arms' checks."""
    records, _ = _race_study(tmp_path, monkeypatch, (3 + 3 * 3) * 20 + 70)
    err = capsys.readouterr().err
    rounds: dict[str, int] = {}
    for rec in records:
        arm = rec["metadata"]["study_arm"]
        rounds[arm] = max(rounds.get(arm, 0), rec["trial"])
    assert rounds["slow"] == 3 and rounds["fast"] == rounds["same"] == 4, (rounds, err[-1500:])
    assert "study race stopped (budget) after 3 round(s)" not in err


def test_a_latency_check_on_an_arm_that_left_connections_unserved_is_inconclusive() -> None:
    """sync-vs-async-p99's case: uwsgi at c50 serving 16 % of its connections (Little's law:
    mean 0.41 ms × 19,354 req/s / 50) has a p99 of 1.7 ms, of the requests it accepted, far
    below gunicorn-sync's 40 ms over 6 paired rounds: the p99 check says why it cannot
    compare them, never "reproduced"; its req/s check is judged as usual; uwsgi serving its
    connections is judged on its p99 again."""
    rec = next(r for r in load_records(FIXTURES / "records")[0] if r.status == "ok")

    def records(uwsgi_mean: float) -> list:
        out = []
        for arm, rps, mean, p99, noise in (
            ("uwsgi", 19_354.0, uwsgi_mean, 1.7, NOISE),
            ("gunicorn-sync", 1_200.0, 40.0, 40.0, [0.0] * len(NOISE)),
        ):
            for trial, (round_effect, n) in enumerate(zip(ROUND_EFFECT, noise, strict=True), 1):
                effect = round_effect * math.exp(n)
                meta = {**rec.metadata, "study": "s", "study_arm": arm, "study_run": "r1"}
                latency = {**rec.latency_ms, "mean": mean, "p99": p99 * effect}
                out.append(
                    replace(
                        rec, metadata=meta, concurrency=50, rps=rps * effect, latency_ms=latency,
                        trial=trial, run_id=f"{arm}{trial}",
                    )
                )  # fmt: skip
        return out

    p99 = {"kind": "less", "metric": "p99_ms", "a": {"arm": "uwsgi"}, "b": {"arm": "gunicorn-sync"}}
    rps = {**p99, "metric": "rps", "a": {"arm": "gunicorn-sync"}, "b": {"arm": "uwsgi"}}
    starved = verdict.outcome(p99, records(0.41))
    assert starved.result == "inconclusive"
    assert "uwsgi left connections unserved" in starved.line
    assert verdict.outcome(rps, records(0.41)).result == "reproduced"
    assert verdict.outcome(p99, records(2.6)).result == "reproduced"


def test_a_check_on_an_arm_without_records_says_which_arm_and_why() -> None:
    """A check whose arm has no record at all (added to the study after its question was
    asked: accept-queue-abort's alb-sync arms on the reference) says so by name, never "a run
    failed"; an arm whose runs all failed says that instead."""
    rec = next(r for r in load_records(FIXTURES / "records")[0] if r.status == "ok")
    meta = {**rec.metadata, "study": "s", "study_run": "r1"}
    present = [
        replace(rec, metadata={**meta, "study_arm": "sync"}, trial=t, run_id=f"s{t}")
        for t in (1, 2, 3)
    ]
    check = {"kind": "less", "metric": "rps", "a": {"arm": "sync"}, "b": {"arm": "added"}}
    found = verdict.outcome(check, present)
    assert found.held == "not measured"
    assert "arm added has no record: not run in this session" in found.line
    assert "arm sync" not in found.line and "a run failed" not in found.line
    failed = replace(
        rec, metadata={**meta, "study_arm": "added"}, status="failed", trial=1, run_id="a1"
    )
    assert "arm added's runs failed" in verdict.outcome(check, [*present, failed]).line


def test_a_studys_budget_is_shared_by_its_batches_not_spent_by_each(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """container-limits runs in 6 batches (one per set of container limits). At BUDGET=15
    each batch used to race with the whole 900 s (45 min for its first 3 batches). Each
    now gets the budget left over the batches left: a batch that stops early leaves its
    slack to the next, and the batches together never race past the study's budget."""
    clock = [0.0]
    shares: list[int] = []

    def fake_batch(study, batch, how, rounds) -> int:
        shares.append(rounds.budget_s)
        # the first batch is decided in a third of its share; the others spend it all
        clock[0] += rounds.budget_s / 3 if len(shares) == 1 else rounds.budget_s
        return 0

    monkeypatch.setattr(runner, "_run_batch", fake_batch)
    monkeypatch.setattr(runner.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(runner.cgroup, "unavailable", lambda: None)
    status = runner.execute_studies(
        ["container-limits"],
        base_options(tmp_path / "results", 5),
        None,
        lambda *a, **k: 0,
        runner.sections_for(tmp_path / "results"),
        None,
        plan.Precision(budget_s=900),
    )
    assert status == 0
    assert len(shares) == 6, shares
    assert shares[0] == 150  # 900 s over 6 batches
    assert shares[1] == (900 - 50) // 5  # the first batch's slack goes to the others
    assert shares[1] > shares[0]
    assert clock[0] <= 900 and clock[0] > 900 - 6  # the whole budget, never more
    # other TRIALS pass unchanged
    assert runner.batch_rounds(3, 500.0, 2) == 3 and runner.batch_rounds(None, 0.0, 1) is None
    assert runner.batch_rounds(plan.Precision(budget_s=60), 100.0, 2).budget_s == 1


@pytest.mark.parametrize(
    ("failing", "status"),
    [
        # the default rule's arms brought down under the memory limit: the study's finding
        (("gunicorn-sync-cpus-mem", "uvicorn-cpus-mem"), 0),
        # an arm no check counts on failed runs (a CPU-limit arm) failed: a failed run
        (("gunicorn-sync-cpus-mem", "gunicorn-sync-cpus-50"), 1),
    ],
)
def test_a_failure_the_study_counts_is_its_data_not_a_failed_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing: tuple[str, ...], status: int
) -> None:
    """container-limits' *-cpus-mem arms (the default worker rule under a memory limit) are
    meant to be brought down by the kernel's OOM kills: its checks count oom_kills on failed
    runs. make study exited 1 for them on AMD (2026-11-28), so make reference recorded the
    question "failed (exit 1)" and would retire its 85 records and ask it again at every
    session. Failed runs of arms a check counts on failed runs are the study's data (exit 0);
    any other failed run still makes it 1."""
    results = tmp_path / "results"
    rec = next(r for r in load_records(FIXTURES / "records")[0] if r.status == "ok")

    def fake_execute(arms: list[plan.Options], sections: object, **kw: object) -> int:
        bad = 0
        for i, opts in enumerate(arms):
            arm = str(opts.study.meta["study_arm"])
            failed = arm in failing
            bad |= failed
            meta = {**rec.metadata, **opts.study.meta}
            out = replace(
                rec,
                metadata=meta,
                status="failed" if failed else "ok",
                server=opts.servers[0],
                run_id=f"{len(list(results.glob('records/*.json'))):02d}{i}{arm}",
            )
            write_record(results, out, {})
        return 1 if bad else 0

    monkeypatch.setattr(runner.cgroup, "unavailable", lambda: None)
    arms = ["gunicorn-sync-cpus-mem", "gunicorn-sync-quota-mem", "uvicorn-cpus-mem"]
    arms += ["gunicorn-sync-cpus-50"]
    got = runner.execute_studies(
        ["container-limits"],
        base_options(results, 5),
        None,
        fake_execute,
        runner.sections_for(results),
        arms,
        1,
    )
    assert got == status
    study = schema.load_study("container-limits")
    assert study.fails_as_finding("uvicorn-cpus-mem") and study.fails_as_finding(
        "gunicorn-sync-quota-mem"
    )
    assert not study.fails_as_finding("gunicorn-sync-cpus-50")
