"""Study files are data the harness can run; the verdict follows the file's rule."""

import random
from dataclasses import replace
from pathlib import Path

import pytest

from bench import cli
from bench.core import studyfile
from bench.core.record import load_records
from bench.studies import arms, runner, schema, sections, verdict

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


@pytest.mark.parametrize("name", schema.study_names())
def test_every_study_file_is_valid_and_runnable(name: str) -> None:
    """Each file loads, names real servers, has checks (or, measured in namespaces, what it
    expects), and its first-phase arms (those not derived from measurements) turn into
    harness options with the study's metadata."""
    spec = schema.load_study(name)
    base = cli.options_from(cli.build_parser().parse_args(["run"]))
    options = arms.study_options([name], base)
    first = [a for a in spec.arms if not a.derived]
    assert len(options) == len(first) and (spec.checks or spec.expect)
    servers = set(cli.server_ids())
    for opts, arm in zip(options, first, strict=True):
        assert opts.servers == (arm.server,) and arm.server in servers
        assert opts.study.meta["study"] == name and opts.study.meta["study_arm"] == arm.id


def test_the_five_source_documents_have_a_study() -> None:
    """One study per source document, under the names the issue gives, the production
    studies of issue 16 (cpu-quota, recycle, reload) and the load-balancer studies of issue
    15 (accept-queue-abort, lb-keepalive-race, port-exhaustion), issue 34's protocols and
    issue 33's free-threading, all in studies/."""
    assert schema.study_names() == [
        "accept-queue",
        "accept-queue-abort",
        "container-limits",
        "cpu-quota",
        "default-rule-vs-tuned",
        "free-threading",
        "keepalive-timewait",
        "lb-keepalive-race",
        "port-exhaustion",
        "protocols",
        "recycle",
        "reload",
        "sync-vs-async-p99",
        "sync-vs-async-tuned",
        "sync-vs-gevent",
        "workers-threads",
        "workers-threads-tuned",
    ]


def test_quota_knob_expressions() -> None:
    """ "2*cpus+1" counts the CPUs the process sees; "2*quota+1" the quota rounded up to
    whole CPUs (at least 1); without a quota, quota is the CPUs."""
    knobs = {"workers": "2*cpus+1", "threads": "2*quota"}
    assert schema.resolve_knob_expressions(knobs, 8, 1.0) == {"workers": 17, "threads": 2}
    assert schema.resolve_knob_expressions({"workers": "quota"}, 8, 0.5) == {"workers": 1}
    assert schema.resolve_knob_expressions({"workers": "quota"}, 8, 2.5) == {"workers": 3}
    assert schema.resolve_knob_expressions({"workers": "2*quota+1"}, 4) == {"workers": 9}


def test_cpu_quota_study_arms_carry_quota_and_rule() -> None:
    """Every cpu-quota arm runs under a fractional quota that binds on 2 CPUs (0.5, and 0.25
    for the rule's second pair) and records the worker rule it used."""
    base = cli.options_from(cli.build_parser().parse_args(["run"]))
    options = arms.study_options(["cpu-quota"], base)
    assert {o.cpu_quota for o in options} == {0.5, 0.25}
    assert all(o.mode.runtime == "native" and o.cpus is None for o in options)
    rules = {o.study.meta["study_arm"]: o.study.meta["workers_rule"] for o in options}
    assert rules["rule-cpus"] == "2*cpus+1" and rules["rule-quota"] == "2*quota+1"


def test_knob_rules_are_evaluated_for_this_machine() -> None:
    """Gunicorn's documented 2×CPU+1 and threads = 2×workers, on 2 and on 8 CPUs."""
    knobs = {"threads": "2*workers", "workers": "2*cpus+1", "backlog": 128}
    assert schema.resolve_knob_expressions(knobs, 2) == {
        "workers": 5,
        "threads": 10,
        "backlog": 128,
    }
    assert schema.resolve_knob_expressions({"workers": "cpus"}, 8) == {"workers": 8}
    with pytest.raises(schema.StudyError):
        schema.resolve_knob_expressions({"workers": "__import__('os')"}, 2)


def test_unknown_study_name_is_refused_with_the_valid_ones() -> None:
    """NAME=nope: exit 2 naming the studies."""
    assert cli.main(["study", "--name=nope"]) == 2
    with pytest.raises(cli.UsageError, match="valid: accept-queue"):
        cli.study_names_from("nope")


def _as_arm(rec, arm: str, **changes):
    meta = {**rec.metadata, "study": "sync-vs-gevent", "study_arm": arm, "study_run": "r1"}
    return replace(rec, metadata=meta, run_id=arm + str(changes.get("concurrency")), **changes)


def _trials(rec, arm: str, conc: int, means_s: list[float]) -> list:
    """One record per trial of an arm at a concurrency, with the given mean response times."""
    return [
        replace(
            _as_arm(rec, arm, concurrency=conc, latency_ms={**rec.latency_ms, "mean": s * 1000}),
            trial=i + 1,
            run_id=f"{arm}{conc}t{i}",
        )
        for i, s in enumerate(means_s)
    ]


def test_verdict_follows_the_ratio_rule_where_the_interval_decides() -> None:
    """sync-vs-gevent over three trials: reproduced when the interval of sync/gevent at 30
    and 50 users lies wholly within a factor 2 of the paper's ratios, not reproduced when
    wholly outside, partly when the two checks are decided both ways; the section shows the
    published figure (28.3) beside ours and the interval it rests on."""
    rec = next(r for r in load_records(FIXTURES / "records")[0] if r.status == "ok")
    spec = schema.load_study("sync-vs-gevent")

    def runs(sync30: list, sync50: list, gevent: list) -> list:
        return [
            *_trials(rec, "sync", 30, sync30),
            *_trials(rec, "sync", 50, sync50),
            *_trials(rec, "gevent", 30, gevent),
            *_trials(rec, "gevent", 50, gevent),
        ]

    steady = [3.0, 3.05, 2.95]
    tight = runs([15.0, 15.2, 14.8], [15.0, 15.2, 14.8], steady)  # 5.0× vs 3.29× and 4.56×
    assert verdict.judge(spec, tight)[0] == "reproduced"
    wrong_way = runs([1.5, 1.52, 1.48], [1.5, 1.52, 1.48], steady)  # 0.5×: wholly outside
    assert verdict.judge(spec, wrong_way)[0] == "not reproduced"
    split = runs([40.0, 40.5, 39.5], [15.0, 15.2, 14.8], steady)  # 13× at 30: above 2 × 3.29
    assert verdict.judge(spec, split)[0] == "partly reproduced"
    section = "\n".join(sections.study_section(spec, tight, None))
    assert "**Verdict: reproduced**" in section and "| 28.3 | 15 |" in section
    assert "3 rounds (trials) per arm" in section
    assert "— within (a/b 5.00× [" in section and "3 rounds paired, Holm over 2 checks)" in section


def test_a_ratio_checks_ours_is_the_ratio_it_judges() -> None:
    """A raced arm runs more rounds than the other: its mean over all of them (here a 4th
    trial at 30 s, unpaired) is not the ratio the check judges on paired rounds. The head's
    "ours" is that paired a/b, never a second figure beside it (workers-threads-tuned said
    "ours 1.04×" beside "a/b 0.98× [0.79–1.20]")."""
    rec = next(r for r in load_records(FIXTURES / "records")[0] if r.status == "ok")
    spec = schema.load_study("sync-vs-gevent")
    records = [
        *_trials(rec, "sync", 30, [15.0, 15.2, 14.8, 30.0]),
        *_trials(rec, "sync", 50, [15.0, 15.2, 14.8]),
        *_trials(rec, "gevent", 30, [3.0, 3.05, 2.95]),
        *_trials(rec, "gevent", 50, [3.0, 3.05, 2.95]),
    ]
    found = verdict.outcomes(spec, records)
    for out in found:
        assert out.pair is not None
        ours = out.head.split("ours ")[1].split("×")[0]
        assert f"a/b {ours}× [" in out.why, (out.head, out.why)
    assert any("ours 5.00×" in out.head for out in found)


def test_a_verdict_the_interval_does_not_decide_is_inconclusive() -> None:
    """Noisy trials whose ratio interval reaches past the band's edge: inconclusive with the
    reason, never "reproduced" on the point estimate (5.0×, inside the band)."""
    rec = next(r for r in load_records(FIXTURES / "records")[0] if r.status == "ok")
    spec = schema.load_study("sync-vs-gevent")
    noisy = [6.0, 15.0, 37.5]  # geometric mean 15 s: 5.0×, but ln spread 0.9
    records = [
        *_trials(rec, "sync", 30, noisy),
        *_trials(rec, "sync", 50, noisy),
        *_trials(rec, "gevent", 30, [3.0, 3.0, 3.0]),
        *_trials(rec, "gevent", 50, [3.0, 3.0, 3.0]),
    ]
    word, lines = verdict.judge(spec, records)
    assert word == "inconclusive"
    assert all("— inconclusive: a/b " in line for line in lines)
    assert all("neither separated nor within the margin yet" in line for line in lines)


def test_one_trial_is_inconclusive() -> None:
    """Records of one trial (every study run before STUDY_TRIALS = 3): no interval, so each
    check reads "inconclusive: one trial: cannot decide" whatever its point estimate (a
    tenfold one included), and so does the verdict instead of a word."""
    rec = next(r for r in load_records(FIXTURES / "records")[0] if r.status == "ok")
    spec = schema.load_study("sync-vs-gevent")
    records = [
        *_trials(rec, "sync", 30, [15.0]),
        *_trials(rec, "sync", 50, [15.0]),
        *_trials(rec, "gevent", 30, [3.0]),
        *_trials(rec, "gevent", 50, [3.0]),
    ]
    word, lines = verdict.judge(spec, records)
    assert word == "one trial: cannot decide"
    assert all(line.endswith("— inconclusive: one trial: cannot decide") for line in lines)


def _check(kind: str, **more) -> dict:
    return {"kind": kind, "metric": "mean_s", "a": {"arm": "sync"}, "b": {"arm": "gevent"}, **more}


@pytest.mark.parametrize(
    ("kind", "sync", "gevent", "result"),
    [
        # a below b, the interval of a/b wholly below 1
        ("less", [2.0, 2.1, 1.9], [3.0, 3.1, 2.9], "reproduced"),
        # a above b, wholly
        ("less", [4.0, 4.1, 3.9], [3.0, 3.1, 2.9], "not reproduced"),
        # 0.97× on average but the trials overlap: the interval holds 1
        ("less", [2.5, 3.4, 2.9], [3.0, 3.1, 2.9], "inconclusive"),
        # a figure that is 0 (no log): the paired differences on the figures' own scale
        ("less", [0.0, 0.0, 0.0], [24.0, 25.0, 23.0], "reproduced"),
        # the same figures every round: no spread to test, never proof either way
        ("less", [0.0, 0.0, 0.0], [0.0, 0.0, 0.0], "inconclusive"),
        ("at_most", [0.0, 0.0, 0.0], [0.0, 0.0, 0.0], "inconclusive"),
        ("less", [0.0, 5.0, 40.0], [24.0, 25.0, 23.0], "inconclusive"),
        # within ±5 % of b, decided: not less, but at most
        ("less", [3.0, 3.1, 2.9], [3.01, 3.11, 2.9], "not reproduced"),
        ("at_most", [3.0, 3.1, 2.9], [3.01, 3.11, 2.9], "reproduced"),
    ],
)
def test_less_and_at_most_checks_on_synthetic_trials(
    kind: str, sync: list, gevent: list, result: str
) -> None:
    """Each order check decided by the race engine on the rounds' paired ratios: separated
    (below or above), equivalent within ±5 % (not less; at most), or undecided; zero figures
    (no log) on the paired differences."""
    rec = next(r for r in load_records(FIXTURES / "records")[0] if r.status == "ok")
    records = [*_trials(rec, "sync", 30, sync), *_trials(rec, "gevent", 30, gevent)]
    judged = verdict.outcome(_check(kind), records, family=1)
    assert judged.result == result, judged.line


def test_the_family_widens_the_interval() -> None:
    """The same trials decided alone but not among 20 checks: Holm over the study's checks
    (a check alone in a family of 20 is held to alpha / 20)."""
    rec = next(r for r in load_records(FIXTURES / "records")[0] if r.status == "ok")
    records = [
        *_trials(rec, "sync", 30, [2.75, 2.8, 2.85]),
        *_trials(rec, "gevent", 30, [3.0, 3.1, 3.05]),
    ]
    assert verdict.outcome(_check("less"), records, family=1).result == "reproduced"
    assert verdict.outcome(_check("less"), records, family=20).result == "inconclusive"


def test_a_quota_that_never_bound_decides_nothing() -> None:
    """cpu-quota: trials with a quota that throttled neither arm say nothing about the quota:
    inconclusive with that reason; the same trials with throttling are decided."""
    rec = next(r for r in load_records(FIXTURES / "records")[0] if r.status == "ok")
    spec = schema.load_study("cpu-quota")

    def arm(name: str, p99: list, throttled: float) -> list:
        cgroup = {"cpu_quota": 1.0, "nr_periods": 100, "nr_throttled": 0, "throttled_ms": 0.0}
        return [
            replace(
                rec,
                metadata={**rec.metadata, "study": "cpu-quota", "study_arm": name},
                scenario="db",
                trial=i + 1,
                run_id=f"{name}{i}",
                latency_ms={**rec.latency_ms, "p99": v},
                cgroup={**cgroup, "throttled_ms": throttled},
            )
            for i, v in enumerate(p99)
        ]

    check = spec.checks[0]  # p99 on /db, 2×quota+1 below 2×os.cpu_count()+1
    free = [*arm("rule-quota", [80, 82, 81], 0.0), *arm("rule-cpus", [128, 130, 126], 0.0)]
    judged = verdict.outcome(check, free, family=3)
    assert judged.result == "inconclusive" and "the CPU quota did not bind" in judged.line
    bound = [*arm("rule-quota", [80, 82, 81], 0.0), *arm("rule-cpus", [128, 130, 126], 250.0)]
    assert verdict.outcome(check, bound, family=3).result == "reproduced"
    table = "\n".join(sections.study_section(spec, free, None))
    assert "| quota bound |" in table and "| no (0 ms throttled) |" in table


# -- two phases: open-loop arms at rates measured in the same `make study` --------------------

P99 = schema.STUDIES_DIR / "sync-vs-async-p99.toml"
# The slowest group's best req/s in the synthetic sweep below: gunicorn-sync-w4.
SWEEP_RPS = {
    "uwsgi-w1": 2672.0,
    "uwsgi-w2": 3658.0,
    "uwsgi-w4": 3600.0,
    "gunicorn-sync-w1": 1207.0,
    "gunicorn-sync-w2": 1746.0,
    "gunicorn-sync-w4": 2020.0,
    "gunicorn-gevent-w1": 2088.0,
    "gunicorn-gevent-w2": 2725.0,
    "gunicorn-gevent-w4": 2337.0,
    "uvicorn-w1": 2618.0,
    "uvicorn-w2": 3309.0,
    "uvicorn-w4": 3313.0,
}


def _sweep_record(arm: str, rps: float, run_id: str = "r1"):
    rec = next(r for r in load_records(FIXTURES / "records")[0] if r.status == "ok")
    meta = {**rec.metadata, "study": "sync-vs-async-p99", "study_arm": arm, "study_run": run_id}
    return replace(rec, metadata=meta, run_id=arm, rps=rps, scenario="db", concurrency=50)


def _base(results: Path | None = None):
    argv = ["run"] + ([f"--results={results}"] if results else [])
    return cli.options_from(cli.build_parser().parse_args(argv))


def test_open_loop_rates_are_fractions_of_the_slowest_groups_best() -> None:
    """sync-vs-async-p99's second phase: every open-loop arm runs with oha at 0.5 and 0.8 ×
    the slowest group's best req/s (gunicorn-sync, 2,020: 1,010 and 1,616 req/s), with its
    own group's best knobs, and its records say where both came from."""
    spec = schema.load_study("sync-vs-async-p99")
    records = [_sweep_record(arm, rps) for arm, rps in SWEEP_RPS.items()]
    basis = arms.rate_basis(spec, records, "slowest-best-rps")
    assert (basis.group, basis.arm) == ("gunicorn-sync", "gunicorn-sync-w4")
    assert basis.rps == pytest.approx(2020.0)  # a geometric mean of equal figures
    options, skipped = arms.derived_options(spec, records, _base(), "r1")
    assert skipped == []
    by_arm = {o.study.meta["study_arm"]: o for o in options}
    assert sorted(by_arm) == sorted(a.id for a in spec.arms if a.derived)
    best_workers = {"uwsgi": 2, "gunicorn-sync": 4, "gunicorn-gevent": 2, "uvicorn": 4}
    for group, workers in best_workers.items():
        opts = by_arm[f"{group}-open"]
        assert opts.load_tool == "oha" and opts.rates == (1010, 1616)
        assert opts.overrides == {"workers": workers}
        assert opts.concurrency == ()  # the pool is sized per rate (plan.pool_for)
        assert opts.study.meta["study_rates"] == {"0.5": 1010, "0.8": 1616}
        assert opts.study.meta["study_rate_basis"]["arm"] == "gunicorn-sync-w4"
        assert opts.study.meta["study_knobs_from"] == f"{group}-w{workers}"


def test_a_group_without_measurements_skips_its_open_loop_arm_only() -> None:
    """Every uvicorn arm failed: the rates come from the groups that were measured, and
    uvicorn-open is not run, with a line saying why."""
    spec = schema.load_study("sync-vs-async-p99")
    records = [_sweep_record(a, r) for a, r in SWEEP_RPS.items() if not a.startswith("uvicorn")]
    options, skipped = arms.derived_options(spec, records, _base(), "r1")
    assert [o.study.meta["study_arm"] for o in options] == [
        "uwsgi-open",
        "gunicorn-sync-open",
        "gunicorn-gevent-open",
    ]
    assert skipped == ["arm uvicorn-open not run: no arm of group uvicorn was measured"]


def test_make_study_runs_the_second_phase_from_the_first_phases_records(tmp_path: Path) -> None:
    """One `make study`: the closed-loop sweep (wrk) is executed first; its records, read back
    from RESULTS, size the open-loop arms (oha), executed after, with the same study_run."""
    from bench.core.record import write_record

    calls = []
    template = _sweep_record("x", 0.0)

    def fake_execute(options, sections) -> int:
        calls.append(list(options))
        for opts in options:
            if opts.load_tool == "wrk":
                arm = str(opts.study.meta["study_arm"])
                meta = {**template.metadata, **opts.study.meta, "started_at": arm}
                rec = replace(template, metadata=meta, run_id=arm, rps=SWEEP_RPS[arm])
                write_record(opts.results, rec, {})
        return 0

    base = _base(tmp_path)
    assert runner.execute_studies(["sync-vs-async-p99"], base, 3, fake_execute, list) == 0
    assert [{o.load_tool for o in batch} for batch in calls] == [{"wrk"}, {"oha"}]
    assert len(calls[0]) == 12 and len(calls[1]) == 4
    assert {o.rates for o in calls[1]} == {(1010, 1616)}
    assert {o.duration_s for batch in calls for o in batch} == {3}
    assert len({o.study.meta["study_run"] for batch in calls for o in batch}) == 1


def _one_line_error(capsys: pytest.CaptureFixture[str], *needles: str) -> None:
    err = capsys.readouterr().err
    assert err.startswith("bench: ") and err.count("\n") == 1, err
    for needle in needles:
        assert needle in err, err


def _refused_when_changed(
    text: str,
    change: tuple[str, str],
    message: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A study file `text` with one `change` (old, new) applied: make study refuses it with
    one line naming the file and `message`, exit 2, nothing written."""
    old, new = change
    assert old in text
    monkeypatch.setattr(studyfile, "STUDIES_DIR", tmp_path / "studies")
    (tmp_path / "studies").mkdir()
    (tmp_path / "studies" / "broken.toml").write_text(text.replace(old, new, 1))
    results = tmp_path / "results"
    assert cli.main(["study", "--name=broken", f"--results={results}"]) == 2
    _one_line_error(capsys, "broken.toml", message)
    assert not results.exists()


OPEN_ARM = 'id = "uwsgi-open"'
BAD_OPEN_LOOP = [
    (('load = "oha"\nfrom_best = "uwsgi"', 'load = "ohha"\nfrom_best = "uwsgi"'), "unknown load"),
    (('of = "slowest-best-rps" }', 'of = "fastest" }'), "of = 'fastest' is unknown; valid"),
    (("fraction = [0.5, 0.8], of", "fraction = [0, 0.8], of"), "fraction must be a list"),
    (("fraction = [0.5, 0.8], of", "fraction = [], of"), "fraction must be a list"),
    (("fraction = [0.5, 0.8], of", "fraction = [0.5, 0.5], of"), "fraction must be a list"),
    (("rates_from = { fraction", "rates_from = { typo = 1, fraction"), "rates_from must be"),
    (('from_best = "uwsgi"', 'from_best = "uwsgl"'), "from_best names unknown group 'uwsgl'"),
    (('from_best = "uwsgi"', 'from_best = "uvicorn"'), "runs ['uvicorn'], not 'uwsgi'"),
    (('from_best = "uwsgi"', 'from_best = "uwsgi"\nknobs = { workers = 2 }'), "drop knobs"),
    (('from_best = "uwsgi"', 'from_best = "uwsgi"\ngroup = "uwsgi"'), "in no group"),
    (("rates_from = { fraction = [0.5, 0.8], of", "ratez = { of"), "unknown keys ['ratez']"),
    (('load = "oha"\nfrom_best = "uwsgi"', 'from_best = "uwsgi"'), "need an open-loop load"),
    (
        ('load = "oha"\nfrom_best = "uwsgi"', 'load = "oha"\nrates = [100]\nfrom_best = "uwsgi"'),
        "give either rates",
    ),
    (('best_by = "rps"', "# no best_by"), "need best_by"),
    (
        (
            'fraction = 0.8 }\nb = { arm = "uvicorn-open", fraction = 0.8 }',
            'fraction = 0.3 }\nb = { arm = "uvicorn-open", fraction = 0.8 }',
        ),
        "fraction = 0.3 is not one arm uwsgi-open runs at; valid: 0.5, 0.8",
    ),
    (
        ('b = { arm = "uvicorn-open", fraction = 0.8 }', 'b = { arm = "uvicorn" }'),
        "compares a closed-loop arm with an open-loop one",
    ),
    (('rejudges = "p99-sync-gevent"', 'rejudges = "p99-nope"'), "rejudges = 'p99-nope'"),
    (
        ('b = { arm = "uvicorn-open", fraction = 0.5 }', 'b = { arm = "uvicorn-open", rate = 5 }'),
        "unknown keys ['rate']",
    ),
    (("[run]\n", '[run]\nload = "oha"\n'), "['load'] belong to an [[arm]]"),
]


@pytest.mark.parametrize(("change", "message"), BAD_OPEN_LOOP)
def test_bad_open_loop_keys_are_one_line_and_exit_2(
    change: tuple[str, str],
    message: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """load, rates, rates_from, from_best and the checks' fraction/rejudges: a bad value is
    one line naming the file and the key, exit 2, nothing run."""
    text = P99.read_text()
    _refused_when_changed(text, change, message, tmp_path, monkeypatch, capsys)


def test_fixed_rates_must_be_whole_positive_numbers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """accept-queue's rates = [120]: 0, a fraction or an empty list is refused."""
    text = (schema.STUDIES_DIR / "accept-queue.toml").read_text()
    monkeypatch.setattr(studyfile, "STUDIES_DIR", tmp_path)
    for bad in ("[0]", "[12.5]", "[]", '"120"'):
        (tmp_path / "broken.toml").write_text(text.replace("rates = [120]", f"rates = {bad}", 1))
        assert cli.main(["study", "--name=broken", f"--results={tmp_path / 'r'}"]) == 2
        _one_line_error(capsys, "rates must be a list of whole requests/s")


P99_RECORDS = FIXTURES / "studies" / "sync-vs-async-p99"  # a real run (DURATION=3), trimmed


def _three_trials(records: list) -> list:
    """Each record as three trials 1 % apart (latencies and req/s), the order of the three
    factors turned by one per record: the same run with an interval (the same factor for
    every arm in a round would give every check the same ratio each round: no spread)."""
    out = []
    factors = (0.99, 1.0, 1.01)
    for k, rec in enumerate(records):
        for trial in (1, 2, 3):
            # records whose turns line up (k 3 apart) still differ by a seeded jitter of at
            # most 0.3 %, so no two arms keep one ratio every round
            factor = factors[(trial + k) % 3] * random.Random(f"{k} {trial}").uniform(0.997, 1.003)
            latency = {k: v * factor for k, v in (rec.latency_ms or {}).items()}
            rps = rec.rps * factor if rec.rps else rec.rps
            run_id = f"{rec.run_id}-t{trial}"
            out.append(replace(rec, trial=trial, latency_ms=latency, rps=rps, run_id=run_id))
    return out


def test_the_section_shows_both_load_models_and_what_changed() -> None:
    """From a real two-phase run: a verdict per load model (each labelled from the records),
    the checks of each (one trial: inconclusive; uWSGI's p99 not comparable: it left
    connections unserved, bench.report.groups.starved), why the models differ (the pace each arm
    set itself vs the rates every arm was offered), and two tables — the open-loop one with
    the offered rate as a share of the slowest's capacity."""
    records, problems = load_records(P99_RECORDS)
    assert problems == [] and len(records) == 20
    spec = schema.load_study("sync-vs-async-p99")
    section = "\n".join(sections.study_section(spec, records, None))
    assert (
        "**Verdict: closed loop (wrk, 50 connections): inconclusive; open loop "
        "(oha) at equal offered rates: one trial: cannot decide** (run 20261123T131128Z on vm, 12 "
        "runs from 2026-11-23T13:11:52Z, 1 round (trials) per arm, a fixed number of rounds;"
    ) in section
    assert (
        "- p99, best uWSGI below best Uvicorn (paper: 33 < 75 ms): 12.3 vs 65.9 — "
        "inconclusive: uwsgi left connections unserved (under half served, by Little's law): "
        "its latency times only the requests it accepted"
    ) in section
    assert "Closed loop (wrk, 50 connections):\n\n| arm | route | conc." in section
    assert "| offered req/s | achieved req/s (ours) |" in section
    assert (
        "| uWSGI + Flask, open loop (knobs of uwsgi-w2) | `/db` | 50 | 1,000 (80 %) | 984 | "
        "22 | 1.24 |"
    ) in section


def test_three_trials_decide_and_show_what_the_load_model_changed() -> None:
    """The same run as three trials 1 % apart: checks whose arms differ by far more than the
    spread are decided (uWSGI's p99 below Uvicorn's open loop; closed loop it is not
    comparable: uWSGI left connections unserved), the closed-loop sync vs
    gevent p99s (72.95 vs 72.57 ms) are equivalent within ±5 % (so sync is not below), and
    the open-loop check that says otherwise is named as changed."""
    records = _three_trials(load_records(P99_RECORDS)[0])
    spec = schema.load_study("sync-vs-async-p99")
    section = "\n".join(sections.study_section(spec, records, None))
    assert "3 rounds (trials) per arm" in section
    assert (
        "- p99, best uWSGI below best Uvicorn (paper: 33 < 75 ms): 12.3 vs 65.8 — inconclusive: "
        "uwsgi left connections unserved"
    ) in section
    assert (
        "- p99, best uWSGI below best Uvicorn (paper: 33 < 75 ms): inconclusive closed loop, "
        "holds open loop"
    ) in section
    assert (
        "- p99, best Gunicorn sync below best Gunicorn gevent (paper: 42 < 136 ms): 72.8 vs "
        "72.6 — does not hold (a/b 1.00× [0.96–1.05] (95 % interval), 3 rounds paired, Holm "
        "over 7 checks: a = b within ±5 %)"
    ) in section
    assert (
        "- p99, best Gunicorn sync below best Gunicorn gevent (paper: 42 < 136 ms): "
        "does not hold closed loop, holds open loop"
    ) in section
    assert "every arm was offered the same 625 (50 %), 1,000 (80 %) req/s" in section
    assert "of gunicorn-sync's best 1,249 req/s" in section


def test_records_from_before_the_open_loop_arms_still_render() -> None:
    """The closed-loop records alone (an older run): the closed-loop verdict and table as
    before, and one line saying the open loop was not run."""
    records = [r for r in load_records(P99_RECORDS)[0] if r.offered_rps is None]
    spec = schema.load_study("sync-vs-async-p99")
    section = "\n".join(sections.study_section(spec, records, None))
    assert "**Verdict: inconclusive** (run 20261123T131128Z on vm, 4 runs" in section
    assert "Open loop: not in this run (`make study NAME=sync-vs-async-p99` runs it)." in section
    assert "offered req/s" not in section and "| uwsgi | `/db` | 50 | 22 | 1.67 |" in section


def test_a_configuration_that_cannot_run_today_keeps_its_row() -> None:
    """workers-threads (source 001): gaiohttp, removed in Gunicorn 20.0, is shown as the
    source published it, beside what runs instead, in every rendering of the section."""
    workers = schema.load_study("workers-threads")
    lines = sections.not_run_table(workers)
    (row,) = [line for line in lines if line.startswith("| gaiohttp")]
    assert "removed in Gunicorn 20.0" in row and "worse than sync" in row
    assert "UvicornWorker" in row
    assert sections.not_run_table(schema.load_study("accept-queue")) == []


def test_the_readme_states_the_generated_study_cost() -> None:
    """docs/studies.md's table of what the trials cost is the one python -m bench.studies.cost
    prints from the study files (never typed in), and its arithmetic is arms × scenarios ×
    points × (warmup + duration) × trials: sync-vs-gevent is 2 arms × 5 connection counts ×
    20 s, tripled by 3 trials."""
    from bench.studies import cost

    readme = (Path(__file__).resolve().parents[2] / "docs" / "studies.md").read_text()
    for line in cost.cost_table():
        assert line in readme, line
    gevent = schema.load_study("sync-vs-gevent")
    assert cost.measured_seconds(gevent, 1) == 2 * 5 * 20
    assert cost.measured_seconds(gevent, 3) == 3 * 2 * 5 * 20
    # arms in a namespace of a judged study run in rounds, with no warmup window: 4 arms of
    # 10 s; the keep-alive race's arms are bounded by their probes and gaps, not counted
    port = schema.load_study("port-exhaustion")
    assert cost.measured_seconds(port, 1) == 4 * 10
    assert cost.measured_seconds(port, 3) == 3 * 4 * 10
    race = schema.load_study("lb-keepalive-race")
    assert cost.measured_seconds(race, 3) == cost.measured_seconds(race, 1) == 0


def test_container_limits_arms_carry_runtime_limits_and_rule() -> None:
    """container-limits: every arm in its image (runtime docker) under the engine's --cpus
    (0.5 or 0.25) and, for the *-mem arms, --memory in bytes; workers = "cpus" counts what
    os.cpu_count() sees, "quota" the limit rounded up (1); no native quota."""
    base = cli.options_from(cli.build_parser().parse_args(["run"]))
    options = {o.study.meta["study_arm"]: o for o in arms.study_options(["container-limits"], base)}
    assert {o.mode.runtime for o in options.values()} == {"docker"}
    assert {o.cpus for o in options.values()} == {0.5, 0.25}
    assert all(o.cpu_quota is None for o in options.values())
    sync = options["gunicorn-sync-quota-mem"]
    assert sync.memory_bytes == 113 * 2**20 and sync.overrides["workers"] == 1
    assert options["gunicorn-sync-cpus-25"].memory_bytes is None
    cpus = len(__import__("os").sched_getaffinity(0))
    assert options["uvicorn-cpus-25"].overrides["workers"] == cpus
    # under the memory limit, the rules users deploy: Gunicorn's 2 x CPUs + 1, hyperglass's
    # 2 x CPUs for Uvicorn
    assert options["gunicorn-sync-cpus-mem"].overrides["workers"] == 2 * cpus + 1
    assert options["granian-cpus-mem"].overrides["workers"] == 2 * cpus + 1
    assert options["uvicorn-cpus-mem"].overrides["workers"] == 2 * cpus
    assert options["uvicorn-cpus-mem"].study.meta["workers_rule"] == "2*cpus"


def test_arms_of_other_limits_run_in_harness_runs_of_their_own() -> None:
    """One harness run starts its containers with one set of limits: consecutive arms of
    the same limits share a batch, a change of --cpus or --memory starts another."""
    study = schema.load_study("container-limits")
    base = cli.options_from(cli.build_parser().parse_args(["run"]))
    pairs = [(a, arms.arm_options(study, a, base, "r")) for a in study.arms]
    batches = runner._batches(study, pairs)
    for batch in batches:
        assert len({(o.cpus, o.memory_bytes, o.mode.runtime) for _, o in batch}) == 1
    # 0.5 CPU (8 arms), 0.25 CPU (8 arms), then per memory limit (one a server)
    assert [len(b) for b in batches] == [8, 8, 2, 2, 2, 2]


BAD_RUNTIME = [
    (('[run]\nruntime = "docker"', '[run]\nruntime = "podman"'), "'podman' is unknown"),
    (('[run]\nruntime = "docker"', '[run]\nruntime = "native"'), "limit a container"),
    (("cpus = 0.25\n", "cpus = 9.0\n"), "valid: cpus = 0.01.."),
    (("cpus = 0.25\n", "cpus = 0\n"), "cpus must be a number of CPUs"),
    (('memory = "113m"', 'memory = "lots"'), "'lots' is not a size"),
    (('memory = "113m"', 'memory = "1m"'), "below docker's floor"),
    (("[run]\n", "[run]\ncpu_quota = 0.5\n"), "not supported with runtime = 'docker'"),
]


@pytest.mark.parametrize(("change", "message"), BAD_RUNTIME)
def test_bad_runtime_or_limits_are_one_line_and_exit_2(
    change: tuple[str, str],
    message: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """runtime, cpus and memory in a study file: an unknown runtime, limits without docker,
    a CPU count outside docker's range, a size docker refuses, a native quota in a
    container: one line naming the file and the key, exit 2, nothing run."""
    text = (schema.STUDIES_DIR / "container-limits.toml").read_text()
    _refused_when_changed(text, change, message, tmp_path, monkeypatch, capsys)


def test_a_missing_image_is_refused_with_the_make_images_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """runtime = "docker" arms whose servers have no current image: one line naming every
    missing one and the `make images SERVER=...` that builds them, exit 2, nothing run."""
    from bench.host import images

    def no_image(spec, arch, python=None):
        raise images.ImageError(f"RUNTIME=docker: no image of {spec.id}")

    monkeypatch.setattr(runner.docker, "engine_problem", lambda: None)
    monkeypatch.setattr(runner.images, "image_for", no_image)
    results = tmp_path / "results"
    assert cli.main(["study", "--name=container-limits", f"--results={results}"]) == 2
    _one_line_error(capsys, "make images SERVER=granian,gunicorn-gthread,gunicorn-sync,uvicorn`")
    assert not results.exists()


def test_arms_on_a_build_in_containers_need_its_images(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The free-threading study with runtime = "docker": its arms' python is taken in a
    container (it was refused: the images carried the usual python3), and the missing images
    are named per interpreter, each with its `make images SERVER=... PYTHON=...`; nothing run."""
    from bench.host import images

    asked: set[tuple[str, str | None]] = set()

    def no_image(spec, arch, python=None):
        asked.add((spec.id, python))
        raise images.ImageError(f"RUNTIME=docker: no image of {spec.id}")

    text = (schema.STUDIES_DIR / "free-threading.toml").read_text()
    monkeypatch.setattr(studyfile, "STUDIES_DIR", tmp_path / "studies")
    (tmp_path / "studies").mkdir()
    (tmp_path / "studies" / "ft-docker.toml").write_text(
        text.replace("[run]\n", '[run]\nruntime = "docker"\n', 1)
    )
    study = schema.load_study("ft-docker")
    wanted = {(a.server, str(study.settings(a)["python"])) for a in study.arms}
    monkeypatch.setattr(runner.docker, "engine_problem", lambda: None)
    monkeypatch.setattr(runner.images, "image_for", no_image)
    results = tmp_path / "results"
    assert cli.main(["study", "--name=ft-docker", f"--results={results}"]) == 2
    assert asked == wanted and len({p for _, p in wanted}) == 2
    err = capsys.readouterr().err
    assert err.startswith("bench: ") and err.count("\n") == 1, err
    for python in {p for _, p in wanted}:
        servers = ",".join(sorted(s for s, p in wanted if p == python))
        assert f"`make images SERVER={servers} PYTHON={python}`" in err, err
    assert not results.exists()


def test_a_container_records_throttling_and_oom_kills_as_study_metrics() -> None:
    """A RUNTIME=docker record's `container` window gives throttled ms, the share of periods
    throttled, OOM kills and the memory peak; the quota counts as bound when throttled."""
    from bench.report.production import quota_bound
    from bench.studies.metrics import metric_value

    rec = load_records(P99_RECORDS)[0][0]
    window = {"quota_us": 50000, "period_us": 100000, "nr_periods": 40, "nr_throttled": 10}
    window |= {"throttled_ms": 812.5, "oom_kills": 3, "memory_peak_mb": 99.5, "memory_failcnt": 7}
    boxed = replace(rec, cgroup=None, container=window)
    assert metric_value(boxed, "throttled_ms") == 812.5
    assert metric_value(boxed, "throttled_pct") == 25.0
    assert metric_value(boxed, "oom_kills") == 3.0
    assert metric_value(boxed, "memory_peak_mb") == 99.5
    assert metric_value(boxed, "memory_failcnt") == 7.0
    assert quota_bound(boxed) is True
    assert quota_bound(replace(boxed, container={**window, "throttled_ms": 0})) is False
    # no CPU limit on the container: no quota to bind, no throttling figure
    unlimited = replace(boxed, container={**window, "quota_us": None})
    assert quota_bound(unlimited) is None and metric_value(unlimited, "throttled_ms") is None


def test_name_all_leaves_out_a_container_study_without_its_images(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """NAME=all on a machine without the images: the container study is left out with one
    line naming the make images command, the others run."""
    from bench.host import images

    def no_image(spec, arch, python=None):
        raise images.ImageError(f"RUNTIME=docker: no image of {spec.id}")

    ran: list[list[str]] = []
    monkeypatch.setattr(runner.docker, "engine_problem", lambda: None)
    monkeypatch.setattr(runner.images, "image_for", no_image)
    monkeypatch.setattr(runner, "execute_studies", lambda names, *a: ran.append(names) or 0)
    names = ["container-limits", "cpu-quota"]
    assert runner.run(names, tmp_path, None, 1, skip_unrunnable=True) == 0
    assert ran == [["cpu-quota"]]
    err = capsys.readouterr().err
    assert err.startswith("bench: skipping container-limits: ") and "make images SERVER=" in err
    with pytest.raises(schema.StudyError, match="make images SERVER="):
        runner.run(names, tmp_path, None, 1)


def test_an_older_run_at_another_quota_is_labelled_with_the_quota_it_ran_at() -> None:
    """cpu-quota's file now sets 0.5 CPU; records that ran at 1 CPU keep the file's label
    plus the quota they carry, so an old run is never shown under the new figure."""
    study = schema.load_study("cpu-quota")
    rec = load_records(P99_RECORDS)[0][0]
    meta = {**rec.metadata, "study": "cpu-quota", "study_arm": "rule-cpus"}
    old = replace(rec, metadata=meta, cgroup={"cpu_quota": 1.0})
    now = replace(rec, metadata={**meta, "study_arm": "w1"}, cgroup={"cpu_quota": 0.5})
    labels = sections._arm_labels(study, [old, now])
    assert labels["rule-cpus"].endswith("0.5-CPU quota (this run: a 1-CPU quota)")
    assert labels["w1"] == "Gunicorn sync, workers 1, 0.5-CPU quota"


def test_arms_names_arms_of_the_named_studies_or_is_refused() -> None:
    """ARMS=: a comma list of the named studies' arm ids (`all` or unset: every arm); an
    unknown id is one line naming the valid ones, exit 2; a second-phase arm is refused (its
    rates come from the first phase of the same run)."""
    race = ["lb-keepalive-race"]
    assert cli.study_arms_from(" gevent-fix, meinheld-fix", race) == ("gevent-fix", "meinheld-fix")
    assert cli.study_arms_from("all", race) is None and cli.study_arms_from(None, race) is None
    with pytest.raises(cli.UsageError, match="unknown ARMS 'nope'; valid: gthread-default, "):
        cli.study_arms_from("gevent-fix,nope", race)
    with pytest.raises(cli.UsageError, match="unknown ARMS"):  # an arm of a study not named
        cli.study_arms_from("uwsgi-w1", race)
    with pytest.raises(cli.UsageError, match="ARMS uwsgi-open: derived from the first phase"):
        cli.study_arms_from("uwsgi-w1,uwsgi-open", ["sync-vs-async-p99"])
    assert cli.main(["study", "--name=lb-keepalive-race", "--arms=nope"]) == 2


def test_make_study_with_arms_runs_only_those(tmp_path: Path) -> None:
    """ARMS= of first-phase arms: only those are executed, and no second phase (no derived
    arm was named); the study's other arms are not run."""
    calls = []

    def fake_execute(options, sections) -> int:
        calls.append([str(o.study.meta["study_arm"]) for o in options])
        return 0

    base = _base(tmp_path)
    chosen = ("uvicorn-w2", "uwsgi-w1")
    assert runner.execute_studies(["sync-vs-async-p99"], base, 3, fake_execute, list, chosen) == 0
    assert calls == [["uwsgi-w1", "uvicorn-w2"]]  # in the file's order, one batch
    study = schema.load_study("lb-keepalive-race")
    assert [a.id for a in runner.only_arms(study, ("meinheld-fix",)).arms] == ["meinheld-fix"]
    assert runner.only_arms(study, None) is study


def _run_of(rec, run: str, arm: str, trial: int = 1):
    meta = {**rec.metadata, "study": "lb-keepalive-race", "study_run": run, "study_arm": arm}
    return replace(rec, metadata=meta, trial=trial, run_id=f"{run}{arm}{trial}")


def test_each_arm_shows_its_latest_run() -> None:
    """A run of some arms (ARMS=) adds to the runs before it: per arm the records of its
    latest run, every trial of it; an arm only an older run has stays while the study file
    declares it (or nothing is declared), and the section names each run it rests on."""
    from bench.core.record import latest_per_arm

    rec = load_records(FIXTURES / "lb-race")[0][0]
    records = [
        _run_of(rec, "r1", "gevent-default"),
        _run_of(rec, "r1", "gevent-fix"),
        _run_of(rec, "r1", "gone"),  # an arm the file no longer declares
        _run_of(rec, "r2", "gevent-fix", 1),
        _run_of(rec, "r2", "gevent-fix", 2),
        _run_of(rec, "r0", "gevent-default"),
    ]
    picked = {(r.metadata["study_arm"], r.metadata["study_run"], r.trial) for r in records}
    got = latest_per_arm(records, "lb-keepalive-race", ("gevent-default", "gevent-fix"))
    assert {(r.metadata["study_arm"], r.metadata["study_run"], r.trial) for r in got} == {
        ("gevent-default", "r1", 1),
        ("gevent-fix", "r2", 1),
        ("gevent-fix", "r2", 2),
    }
    everything = latest_per_arm(records, "lb-keepalive-race")
    assert (
        ("gone", "r1", 1)
        in {(r.metadata["study_arm"], r.metadata["study_run"], r.trial) for r in everything}
        <= picked
    )
    # The newest run's arms are kept even when the file no longer declares them.
    assert len(latest_per_arm(records, "lb-keepalive-race", ("gevent-default",))) == 3
    assert latest_per_arm(records, "no-such-study") == []
    text = "\n".join(sections.summary_sections(got))
    assert "Runs r1 (1 arm), r2 (1 arm: gevent-fix), each arm's latest" in text
    run = "Run 20261123T160812Z, each arm"  # one run: as before, its id as written
    assert run in "\n".join(sections.summary_sections([_run_of(rec, "20261123T160812Z", "x")]))


def test_a_race_arm_costs_its_probe_and_its_gaps_at_most() -> None:
    """The race's cost bound: a fix arm's gaps × rounds (cut to race_budget) and no probe; a
    probing arm its probe_limit plus the whole budget (its gaps follow the measured close)."""
    from bench.studies import cost

    study = schema.load_study("lb-keepalive-race")
    fix, probing = study.arm("gevent-fix"), study.arm("gevent-default")
    assert fix is not None and probing is not None
    gaps = study.settings(fix)["race_gaps_ms"]
    assert cost.race_seconds(study, fix) == sum(gaps) * 4 / 1000  # type: ignore[arg-type]
    assert cost.race_seconds(study, probing) == 65 + 240


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ('kind = "less"\nmetric = "reload_failed"\nmargin_pct = 0.1', "for at_most checks of"),
        ('kind = "at_most"\nmetric = "recovery_s"\nmargin_pct = 0.1', "for at_most checks of"),
        ('kind = "at_most"\nmetric = "reload_failed"\nmargin_pct = 0', "above 0 and below 100"),
        ('kind = "at_most"\nmetric = "reload_failed"\nmargin_pct = "0.1"', "above 0 and below 100"),
    ],
)
def test_a_count_margin_is_refused_where_it_means_nothing(
    change: str, message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """margin_pct (the share of arrivals "a at most b" tolerates on a count): at_most checks
    of counts out of the arrivals only, a number in (0, 100); the shipped reload file uses
    it on its failed-requests check."""
    text = (Path(__file__).resolve().parents[2] / "studies" / "reload.toml").read_text()
    shipped = 'kind = "at_most"\nmetric = "reload_failed"\nmargin_pct = 0.1'
    assert shipped in text
    assert schema.load_study("reload").checks[0]["margin_pct"] == 0.1
    monkeypatch.setattr(studyfile, "STUDIES_DIR", tmp_path)
    (tmp_path / "reload.toml").write_text(text.replace(shipped, change))
    with pytest.raises(schema.StudyError, match=message):
        schema.load_study("reload")
