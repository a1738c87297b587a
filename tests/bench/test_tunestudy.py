"""Study arms tuned by make tune's search (issue 31 item 5): the `tune` keys validated, the
search run through make tune's own code (bench.harness.tuner, with the fake site and load
tool) before the first phase and its answer's knobs made the arm's, the "tuned" check
judged, and the section's lines on the search."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from bench import cli
from bench.cli.options import with_tuned
from bench.core.record import load_records
from bench.harness import tuner
from bench.report import tuned
from bench.studies import arms, runner, schema, sections, tuning, verdict
from tests.bench.test_study import FIXTURES, _one_line_error, _refused_when_changed
from tests.bench.test_tuner import _fakes, _harness

RULE = schema.STUDIES_DIR / "default-rule-vs-tuned.toml"
IDENTITY = {"hostname": "test", "machine_id": "0123456789abcdef"}
SPACE = 'tune = { workers = [1, "cpus", "2*cpus", "4*cpus"], threads = [1, 2, 4, 8] }'


@pytest.fixture(autouse=True)
def _own_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run directories and the run lock in a temporary directory."""
    state = tmp_path / "state"
    state.mkdir()
    monkeypatch.setattr("bench.harness.run.state_base", lambda: state)


BAD_TUNE = [
    (("tune = { workers", "tune = { worker"), "tune names ['worker'], not knobs of"),
    (('tune = { workers = [1, "cpus"', 'tune = { workers = [0, "cpus"'), "tune.workers must be"),
    (('tune = { workers = [1, "cpus"', 'tune = { workers = ["many", "cpus"'), "tune.workers"),
    ((SPACE, "tune = 3"), "tune must be a table of knob = [values] or true"),
    (("knobs = { backlog = 128 }\ntune", "knobs = { backlog = 128, workers = 2 }\ntune"), "both"),
    (("[tune]\nobjective", "[tuning]\nobjective"), "are tuned: add [tune]"),
    (('objective = "rps"', 'objective = "speed"'), "objective = 'speed'; valid: rps, p99"),
    (("budget = 12", "budget = 0"), "[tune] budget must be a whole number in 1..1440"),
    (("margin = 5", "margin = 5.5"), "[tune] margin must be a whole number"),
    (("budget = 12", "budgets = 12"), "unknown ['budgets'], missing ['budget']"),
    (('id = "tuned"', 'id = "tuned"\nscenarios = ["upstream", "db"]'), "searched at one point"),
    (('id = "tuned"', 'id = "tuned"\nconcurrency = [100, 400]'), "searched at one point"),
    (('id = "tuned"', 'id = "tuned"\nload = "oha"\nrates = [100]'), "searched closed loop"),
    (
        (
            'a = { arm = "tuned" }\nb = { arm = "default-rule" }',
            'a = { arm = "vcpu-rule" }\nb = { arm = "default-rule" }',
        ),
        "must name a tuned arm",
    ),
    (
        ('kind = "tuned"\nmetric = "rps"\nexpect', 'kind = "tuned"\nmetric = "s502"\nexpect'),
        "metric must be one of rps, p99_ms",
    ),
    (('expect = "better"', 'expect = "more"'), "expect must be one of at_least, better"),
]


@pytest.mark.parametrize(("change", "message"), BAD_TUNE)
def test_bad_tune_keys_are_one_line_and_exit_2(
    change: tuple[str, str],
    message: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """An arm's tune, the [tune] table, a tuned arm's point and the tuned checks: a bad value
    is one line naming the file and the key, exit 2, nothing run."""
    _refused_when_changed(RULE.read_text(), change, message, tmp_path, monkeypatch, capsys)


def test_tune_true_needs_a_declared_space(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """tune = true takes the server.toml's space: refused for a server declaring none
    (gunicorn-gevent), accepted for one that does (gunicorn-gthread)."""
    text = (schema.STUDIES_DIR / "sync-vs-async-tuned.toml").read_text()
    old = 'server = "gunicorn-gevent"\ntune = { workers = [1, "cpus", "2*cpus", "4*cpus"] }'
    new = 'server = "gunicorn-gevent"\ntune = true'
    _refused_when_changed(text, (old, new), "declares no tune space", tmp_path, monkeypatch, capsys)
    rule = RULE.read_text().replace(SPACE, "tune = true")
    (tmp_path / "studies" / "fine.toml").write_text(rule)
    [study] = schema.load_runnable(["fine"])
    assert study.arm("tuned").tune is True  # type: ignore[union-attr]


def test_budget_without_trials_is_the_searches_and_refused_where_none_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """make study BUDGET=: with TRIALS=3 refused; for a study without a tuned arm refused (it
    would bound nothing); each one line, exit 2, nothing written."""
    results = tmp_path / "results"
    argv = ["study", "--name=workers-threads", f"--results={results}", "--trials-budget=5"]
    assert cli.main(argv) == 2
    _one_line_error(capsys, "BUDGET=5 without TRIALS=auto bounds the searches of tuned arms")
    argv = ["study", "--name=default-rule-vs-tuned", f"--results={results}"]
    assert cli.main([*argv, "--trials=3", "--trials-budget=5"]) == 2
    _one_line_error(capsys, "BUDGET=5 with TRIALS=3")
    assert not results.exists()


def test_a_tuned_arm_runs_the_configuration_make_tunes_search_recommends(tmp_path: Path) -> None:
    """default-rule-vs-tuned's tuned arm, its space cut to workers 1/2: make tune's search
    (the fake site) climbs to workers=2, saves its answer under tuned/<machine>/study-…/
    (where make bench never looks), and the arm's options carry workers=2 over its fixed
    backlog 128 and the search in short; the other arms are untouched."""
    results = tmp_path / "results"
    study = schema.load_study("default-rule-vs-tuned")
    study = replace(
        study,
        arms=tuple(replace(a, tune={"workers": ("1", "2")}) if a.tune else a for a in study.arms),
    )
    base = replace(cli.options_from(cli.build_parser().parse_args(["run"])), results=results)
    options = [(a, arms.arm_options(study, a, base, "r1", 1)) for a in study.arms]
    site, tool = _fakes({1: 1000, 2: 1500}, seed=7)  # workers=2 serves 1.5× workers=1

    def search(opts, space, objective, path, sections) -> int:
        assert opts.precision.budget_s == 12 * 60 and opts.margin == 0.05
        assert "study" not in opts.study.meta and opts.study.meta["study_search_arm"] == "tuned"
        run = _harness(site, tool)
        return tuner.execute(opts, space, objective, sections, harness=run, where=lambda _: path)

    out, status = tuning.tune_arms(study, options, None, IDENTITY, (search, None))
    assert status == 0 and [a.id for a, _ in out] == ["default-rule", "vcpu-rule", "tuned"]
    opts = out[2][1]
    assert opts.overrides == {"backlog": 128, "workers": 2}
    searched = opts.study.meta["study_tuned"]
    assert searched["recommended"]["label"] == "workers=2" and searched["decided"]
    assert searched["runner_up"]["label"] == "workers=1" and searched["runner_up"]["low"] > 1
    path = results / searched["answer"]
    assert path.parent.name == "study-default-rule-vs-tuned" and path.name == "tuned.json"
    assert out[0][1] == options[0][1] and out[1][1] == options[1][1]
    # every search run kept the arm's fixed backlog; make bench does not pick the answer up
    records, _ = load_records(results)
    assert records and all(r.knobs["backlog"] == 128 for r in records if r.status == "ok")
    bench = replace(options[2][1], precision=None, overrides={}, study=base.study)
    assert with_tuned(bench, "1").tuned == {}
    assert not list((results / tuned.DIR).glob("*/*.json"))


def test_a_search_without_an_answer_leaves_its_arm_out(tmp_path: Path) -> None:
    """A search that measured nothing (every configuration failed): the arm does not run,
    the status is 1, BUDGET= (without TRIALS) is the search's budget; an earlier run's answer
    at the same place is never taken for this one's."""
    study = schema.load_study("default-rule-vs-tuned")
    base = replace(cli.options_from(cli.build_parser().parse_args(["run"])), results=tmp_path)
    options = [(a, arms.arm_options(study, a, base, "r1")) for a in study.arms]
    stale = tuning.answer_path(tmp_path, IDENTITY, study.name, "tuned")
    stale.parent.mkdir(parents=True)
    stale.write_text(json.dumps({"recommended": {"knobs": {"workers": 9}}}))
    budgets = []

    def search(opts, space, objective, path, sections) -> int:
        budgets.append(opts.precision.budget_s)
        return 1

    out, status = tuning.tune_arms(study, options, 2, IDENTITY, (search, None))
    assert status == 1 and [a.id for a, _ in out] == ["default-rule", "vcpu-rule"]
    assert budgets == [120] and not stale.exists()


def test_make_study_searches_before_the_first_phase(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """execute_studies: the tuned arm's search first, then one batch of all three arms, the
    tuned one with the answer's knobs."""
    order: list[str] = []

    def fake_search(opts, space, objective, path, sections) -> int:
        order.append("search")
        path.parent.mkdir(parents=True, exist_ok=True)
        answer = {"recommended": {"label": "threads=8 workers=2", "knobs": {"workers": 2}}}
        tuned.write(path, {**answer, "configurations": []})
        return 0

    def fake_execute(batch, sections, **kw) -> int:
        order.append("batch")
        by_arm = {o.study.meta["study_arm"]: o for o in batch}
        assert by_arm["tuned"].overrides == {"backlog": 128, "workers": 2}
        return 0

    monkeypatch.setattr(tuning, "make_tune", fake_search)
    base = replace(cli.options_from(cli.build_parser().parse_args(["run"])), results=tmp_path)
    assert runner.execute_studies(["default-rule-vs-tuned"], base, 1, fake_execute, list) == 0
    assert order == ["search", "batch"]


def _trials(arm: str, rps: list[float], p99: list[float], meta: dict | None = None) -> list:
    rec = next(r for r in load_records(FIXTURES / "records")[0] if r.status == "ok")
    out = []
    for i, (r, p) in enumerate(zip(rps, p99, strict=True)):
        m = {
            **rec.metadata,
            "study": "default-rule-vs-tuned",
            "study_arm": arm,
            "study_run": "r1",
            **(meta or {}),
        }
        # every connection busy (Little's law): a closed-loop arm that served them all
        latency = {**rec.latency_ms, "p99": p, "mean": rec.concurrency / r * 1000}
        out.append(
            replace(rec, metadata=m, trial=i + 1, run_id=f"{arm}{i}", rps=r, latency_ms=latency)
        )
    return out


def _tuned(metric: str, expect: str) -> dict:
    a, b = {"arm": "tuned"}, {"arm": "default-rule"}
    return {"kind": "tuned", "metric": metric, "a": a, "b": b, "expect": expect}


@pytest.mark.parametrize(
    ("metric", "expect", "tuned_rps", "tuned_p99", "result"),
    [
        # req/s: tuned above, decided
        ("rps", "better", [150, 152, 148], [10, 10, 10], "reproduced"),
        ("rps", "at_least", [150, 152, 148], [10, 10, 10], "reproduced"),
        # req/s: equal within ±5 %: at least, not better
        ("rps", "at_least", [100.5, 101.5, 99.2], [10, 10, 10], "reproduced"),
        ("rps", "better", [100.5, 101.5, 99.2], [10, 10, 10], "not reproduced"),
        # req/s: tuned below, decided: neither holds
        ("rps", "at_least", [70, 71, 69], [10, 10, 10], "not reproduced"),
        # p99: lower is better (tuned 5 ms vs 10 ms)
        ("p99_ms", "better", [100, 101, 99], [5.0, 5.3, 4.8], "reproduced"),
        ("p99_ms", "at_least", [100, 101, 99], [20.0, 21.0, 19.0], "not reproduced"),
    ],
)
def test_the_tuned_check_is_judged_in_the_metrics_direction(
    metric: str, expect: str, tuned_rps: list, tuned_p99: list, result: str
) -> None:
    """A tuned check as the at_most / less check it amounts to: better is more req/s and a
    lower p99; at_least holds on equivalence, better only on separation."""
    records = [
        *_trials("tuned", tuned_rps, tuned_p99),
        *_trials("default-rule", [100, 101, 99.5], [10.0, 10.2, 9.8]),
    ]
    judged = verdict.outcome(_tuned(metric, expect), records, family=1)
    assert judged.result == result, judged.line


SEARCH = {
    "objective": "rps",
    "unit": "req/s",
    "margin": 0.05,
    "why": "decided",
    "decided": True,
    "rounds": 7,
    "minutes": 3.25,
    "line": "threads=8 workers=2 > threads=4 workers=2",
    "space_size": 16,
    "best": {"label": "threads=8 workers=2", "figure": 212.4},
    "runner_up": {
        "label": "threads=4 workers=2",
        "ratio": 1.21,
        "low": 1.12,
        "high": 1.3,
        "state": "separated",
    },
    "recommended": {"label": "threads=8 workers=2", "knobs": {"threads": 8, "workers": 2}},
    "equivalent": [],
    "tried": [
        {"label": "threads=1 workers=1", "figure": 20.0, "state": "separated", "reason": ""},
        {"label": "threads=8 workers=4", "figure": None, "state": "out", "reason": "1.5 % failed"},
    ],
    "answer": "tuned/test-01234567/study-default-rule-vs-tuned/tuned.json",
}


def test_the_section_shows_each_tuned_arms_search_and_the_tuned_checks() -> None:
    """The section: the tuned arm labelled with the configuration it ran; per tuned arm the
    search (why it stopped, rounds, minutes, configurations tried of the grid, the best with
    its figure, the runner-up's interval, the equivalents, each configuration and why it
    left, the answer file); the tuned checks decided in the verdict's lines."""
    study = schema.load_study("default-rule-vs-tuned")
    records = [
        *_trials("tuned", [210, 214, 211], [9, 9, 9], {"study_tuned": SEARCH}),
        *_trials("vcpu-rule", [150, 152, 148], [9, 9, 9]),
        *_trials("default-rule", [100, 101, 99.5], [9, 9, 9]),
    ]
    text = "\n".join(sections.study_section(study, records, None))
    assert "tuned by make tune's search (tuned: threads=8 workers=2)" in text
    assert "**Tuned arms**" in text
    assert "ran **threads=8 workers=2**; the search ended decided after 7 round(s), 3.2 min" in text
    assert "2 of 16 configuration(s) in the grid tried: threads=8 workers=2 > threads=4" in text
    assert "best threads=8 workers=2 (212 req/s); runner-up threads=4 workers=2: best/it" in text
    assert "1.21× [1.12–1.30] (separated)" in text and "equivalent within ±5 %: none" in text
    assert "threads=8 workers=4 – (out: 1.5 % failed)" in text
    assert "`tuned/test-01234567/study-default-rule-vs-tuned/tuned.json`" in text
    assert "- req/s, tuned above the 2×CPU+1 rule: " in text
    assert "tuned above the 2×CPU+1 rule: 212 vs 100 — holds (b/a 0.47× [" in text
