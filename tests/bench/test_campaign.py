"""`make reference`: reference.toml checked, the plan (skipped or to run, and why, the minutes),
resumption from the ledger, a failed question recorded and the campaign going on, SIGINT
stopping it between questions. No harness runs: the runner is a fake that writes a real
record (copied from the shipped reference) as a harness would."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from bench.cli import campaign as ask
from bench.core.campaign import CAMPAIGN_FILE, CampaignError, load_campaign
from bench.core.registry import server_ids
from bench.core.variables import BY_NAME
from bench.studies.schema import study_names

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "tests" / "fixtures" / "reference-2026-11" / "records"
IDENT = {"machine_id": "abcdef012345", "cpu_model": "Test CPU", "cpu_count": 2}
# Real records of one session: /db at 50 connections, direct, several servers.
DB_C50 = sorted(REFERENCE.glob("*_vm_*_db_c50_t*.json"))


def _campaign(tmp_path: Path, questions: str) -> Path:
    path = tmp_path / "reference.toml"
    path.write_text(f'results = "{tmp_path / "ref"}"\n\n{questions}')
    return path


BENCH = """[[question]]
id = "direct"
target = "bench"
why = "servers on /db"
[question.variables]
SERVER = "granian,gunicorn-sync"
SCENARIO = "db"
CONCURRENCY = "50"
TRIALS = "auto"
BUDGET = "5"
"""
STUDY = """[[question]]
id = "study-sync-vs-gevent"
target = "study"
why = "source 000"
variables = { NAME = "sync-vs-gevent", TRIALS = "auto", BUDGET = "10" }
"""
LEADERS = """[[question]]
id = "behind-nginx"
target = "bench"
why = "the leaders behind nginx"
leaders = { question = "direct", scenario = "db", concurrency = 50, top = 2 }
[question.variables]
SERVER = "@leaders"
PROXY = "nginx"
SCENARIO = "db"
CONCURRENCY = "50"
TRIALS = "auto"
BUDGET = "5"
"""


def _record(results: Path, source: Path, ident: dict = IDENT) -> str:
    """A real record written into results/records as this machine's."""
    data = json.loads(source.read_text())
    data["metadata"] |= ident
    (results / "records").mkdir(parents=True, exist_ok=True)
    (results / "records" / source.name).write_text(json.dumps(data))
    return source.name


def test_the_shipped_campaign_asks_what_issue_32_asks() -> None:
    """reference.toml loads: every server on /plaintext and /db at c10 and c50 in one
    question, the leaders behind nginx and the ALB-like front, every study, a tune question;
    each raced within a BUDGET, into results/reference."""
    campaign = load_campaign()
    by_id = {q.id: q for q in campaign.questions}
    assert campaign.results == ROOT / "results" / "reference"
    direct = by_id["direct"].variables
    assert (direct["SERVER"], direct["SCENARIO"], direct["CONCURRENCY"]) == (
        "all",
        "plaintext,db",
        "10,50",
    )
    proxies = {q.variables.get("PROXY") for q in campaign.questions if q.leaders is not None}
    assert {"nginx", "alb"} <= proxies
    asked = {q.variables.get("NAME") for q in campaign.questions if q.target == "study"}
    assert asked == set(study_names())
    assert any(q.target == "tune" for q in campaign.questions)
    assert all("BUDGET" in q.variables for q in campaign.questions)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (BENCH.replace('target = "bench"', 'target = "soak"'), "valid: bench, study, tune"),
        (BENCH.replace("SERVER =", "SERVERS ="), "SERVERS is not a variable; did you mean SERVER"),
        (
            BENCH.replace('"granian,gunicorn-sync"', '"nope"'),
            "question direct: unknown SERVER 'nope'",
        ),
        (BENCH.replace('TRIALS = "auto"', 'TRIALS = "3"'), "TRIALS=auto"),
        (BENCH.replace('BUDGET = "5"', ""), "BUDGET= (minutes) is required"),
        (BENCH.replace('SCENARIO = "db"', 'RESULTS = "x"\nSCENARIO = "db"'), "campaign's own"),
        (STUDY.replace("NAME =", 'SERVER = "granian", NAME ='), "make study does not take it"),
        (BENCH + BENCH, "unique"),
        (LEADERS + BENCH, "not an earlier question; valid: none"),
        (BENCH + LEADERS.replace(", top = 2", ""), "needs leaders = {"),
    ],
)
def test_a_campaign_that_cannot_run_is_refused_in_one_line(
    tmp_path: Path, text: str, message: str
) -> None:
    """Each question is parsed as make would parse it: one line naming what is wrong."""
    with pytest.raises(CampaignError) as caught:
        load_campaign(_campaign(tmp_path, text))
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_studys_minutes_cover_its_race_round_and_its_searches(tmp_path: Path) -> None:
    """BUDGET bounds a study's rounds, checked between them: one round of the keep-alive
    race's arms (probes and idle gaps, up to 95 min) runs whole (the first AMD campaign
    planned "about 30 min" for it; its round had run 37 min with 8 of 21 arms to go), and a
    tuned study's searches run before its race, each its [tune] budget, on top of BUDGET."""
    from bench.studies.cost import race_round_seconds, search_seconds
    from bench.studies.schema import load_study

    questions = "".join(
        f'[[question]]\nid = "{name}"\ntarget = "study"\nwhy = "x"\n'
        f'variables = {{ NAME = "{name}", TRIALS = "auto", BUDGET = "5" }}\n'
        for name in ("lb-keepalive-race", "workers-threads-tuned")
    )
    race, tuned = ask.plan(load_campaign(_campaign(tmp_path, questions)), IDENT)
    assert race.minutes >= race_round_seconds(load_study("lb-keepalive-race")) / 60 > 30
    searches = search_seconds(load_study("workers-threads-tuned")) / 60
    assert searches > 0 and tuned.minutes >= searches + 5


def test_the_plan_says_what_runs_what_is_skipped_and_why(tmp_path: Path) -> None:
    """Nothing asked: every question to run, with its command and minutes; the leaders are
    named once their question is answered. Then an answered question is skipped, and asked
    again when its variables change, a record it names is gone, or on another machine."""
    campaign = load_campaign(_campaign(tmp_path, BENCH + LEADERS + STUDY))
    steps = ask.plan(campaign, IDENT)
    assert [s.ask for s in steps] == [True, True, True]
    assert "not asked on this machine yet" in steps[0].why
    assert "the 2 leaders of direct, once it is answered" in steps[1].why
    assert all(s.minutes > 0 for s in steps)
    lines = "\n".join(ask.plan_lines(steps, IDENT))
    assert "make bench SERVER=granian,gunicorn-sync SCENARIO=db" in lines
    assert "make study NAME=sync-vs-gevent TRIALS=auto BUDGET=10" in lines
    assert "3 to run, 0 skipped" in lines

    results = campaign.results
    names = [_record(results, p) for p in DB_C50]
    entry = {
        "question": "direct",
        "fingerprint": campaign.questions[0].fingerprint(),
        "identity": IDENT,
        "status": "answered",
        "records": names,
    }
    ask.append_ledger(results, entry)
    steps = ask.plan(campaign, IDENT)
    assert not steps[0].ask and steps[0].minutes == 0
    assert f"{len(names):,} records" in steps[0].why
    assert steps[1].servers is not None and len(steps[1].servers) == 2
    assert f"SERVER={','.join(steps[1].servers)} PROXY=nginx" in "\n".join(
        ask.plan_lines(steps, IDENT)
    )

    other = dict(IDENT, cpu_model="Another CPU")  # the same machine id on another host
    assert ask.plan(campaign, other)[0].ask
    changed = load_campaign(_campaign(tmp_path, BENCH.replace('"5"', '"6"')))
    assert "its command changed" in ask.plan(changed, IDENT)[0].why
    (results / "records" / names[0]).unlink()
    assert "missing or unreadable" in ask.plan(campaign, IDENT)[0].why


def test_a_study_whose_file_changed_is_asked_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A study answered under one study file, then an arm added to the file (its command
    unchanged): asked again, and its earlier records retired; a ledger line written before
    the ledger kept the file's hash counts as asked under today's file."""
    from bench.core import studyfile

    studies = tmp_path / "studies"
    studies.mkdir()
    source = studyfile.study_path("sync-vs-gevent").read_text()
    (studies / "sync-vs-gevent.toml").write_text(source)
    monkeypatch.setattr(studyfile, "STUDIES_DIR", studies)
    campaign = load_campaign(_campaign(tmp_path, STUDY))
    (q,) = campaign.questions
    results = campaign.results
    names = [_record(results, DB_C50[0])]
    entry = {"question": q.id, "identity": IDENT, "fingerprint": q.fingerprint()}
    entry |= {"status": "answered", "records": names, "definition": q.definition()}
    ask.append_ledger(results, entry)
    assert q.definition() is not None and not ask.plan(campaign, IDENT)[0].ask

    (studies / "sync-vs-gevent.toml").write_text(source + "\n# an arm added\n")
    (step,) = ask.plan(campaign, IDENT)
    assert step.ask and "its study file changed since it was asked" in step.why
    assert ask.retire(q, results, IDENT) == names

    names = [_record(results, DB_C50[1])]
    older = {k: v for k, v in entry.items() if k != "definition"} | {"records": names}
    ask.append_ledger(results, older)
    assert not ask.plan(campaign, IDENT)[0].ask
    assert load_campaign(_campaign(tmp_path, BENCH)).questions[0].definition() is None


def test_leaders_are_the_first_by_req_s_and_never_a_baseline(tmp_path: Path) -> None:
    """@leaders: the servers ranked first by req/s at the question's point (the highest
    median first), no baseline (nginx-static, flask-dev) among them."""
    campaign = load_campaign(_campaign(tmp_path, BENCH + LEADERS))
    names = [_record(campaign.results, p) for p in DB_C50]
    ledger = [{"question": "direct", "identity": IDENT, "status": "answered", "records": names}]
    chosen = ask.leaders(campaign.questions[1], campaign.results, ledger, IDENT)
    assert chosen is not None and len(chosen) == 2
    assert not {"nginx-static", "flask-dev"} & set(chosen)
    assert set(chosen) <= set(server_ids())
    # A question where one server's run failed (exit 1) still ranks the others; one that was
    # interrupted (130) or refused (2) does not.
    for code, known in ((1, True), (130, False), (2, False)):
        entry = dict(ledger[0], status=f"failed (exit {code})", exit=code)
        found = ask.leaders(campaign.questions[1], campaign.results, [entry], IDENT)
        assert (found == chosen) is known, code


def test_leaders_of_a_raced_question_follow_its_race(tmp_path: Path) -> None:
    """A raced question's leaders are its race's (bench.report.standings, the read-out the
    recommendations use): the configurations it left first, starved ones and baselines
    apart (tests/fixtures/race-direct: /plaintext c50 of the 2026-11-26 direct race)."""
    from bench.core.record import Record
    from bench.report import standings
    from bench.report.groups import groups, starved

    raced = sorted((ROOT / "tests" / "fixtures" / "race-direct").glob("*_plaintext_c50_*.json"))
    text = LEADERS.replace('scenario = "db"', 'scenario = "plaintext"').replace(
        "top = 2", "top = 3"
    )
    campaign = load_campaign(_campaign(tmp_path, BENCH + text))
    names = [_record(campaign.results, p) for p in raced]
    ledger = [{"question": "direct", "identity": IDENT, "status": "answered", "records": names}]
    chosen = ask.leaders(campaign.questions[1], campaign.results, ledger, IDENT)
    records = [Record.from_dict(json.loads(p.read_text())) for p in raced]
    kept = [
        r
        for g in groups(records).values()
        if not starved(g) and g[0].server not in {"nginx-static", "flask-dev"}
        for r in g
    ]
    race = standings.judge_point(kept)
    # the fixture's 3 rounds screen nobody since each one's paired test must agree (issue 57)
    assert race is not None
    assert chosen == list(race.standing.ranking[:3])
    assert not {s.config for s in race.standing.screened} & set(chosen)


def test_a_question_asked_again_under_a_new_command_retires_its_old_records(
    tmp_path: Path,
) -> None:
    """behind-nginx asked with BUDGET 5, then with 6: the first asking's records and raw
    files leave RESULTS before the second runs (the summary would judge both sessions side
    by side), the ledger line names them; a question asked again under the same command (a
    record went missing) retires nothing, nor does another machine's or question's; one
    whose earlier asking failed retires that asking's records."""
    campaign = load_campaign(_campaign(tmp_path, BENCH))
    results = campaign.results
    first = [_record(results, p) for p in DB_C50[:2]]
    for name in first:
        data = json.loads((results / "records" / name).read_text())
        for raw in data.get("raw_files") or []:
            (results / raw).parent.mkdir(parents=True, exist_ok=True)
            (results / raw).write_text("raw output")
    q = campaign.questions[0]
    entry = {"question": q.id, "identity": IDENT, "fingerprint": q.fingerprint(), "exit": 0}
    entry["status"] = "answered"
    ask.append_ledger(results, {**entry, "records": first})
    other = {**entry, "identity": {**IDENT, "machine_id": "another"}, "fingerprint": "x"}
    ask.append_ledger(results, {**other, "records": [first[0]]})
    assert ask.retire(q, results, IDENT) == []  # same command: nothing retired
    # an asking of the same command that failed (one server's run failed: exit 1) leaves a
    # session the next asking measures again: retired
    failed = _record(results, DB_C50[2])
    ask.append_ledger(results, {**entry, "status": "failed (exit 1)", "records": [failed]})
    assert ask.retire(q, results, IDENT) == [failed]
    assert not (results / "records" / failed).exists()
    changed = load_campaign(_campaign(tmp_path, BENCH.replace('"5"', '"6"'))).questions[0]
    raws = [
        results / raw
        for name in first
        for raw in json.loads((results / "records" / name).read_text()).get("raw_files") or []
    ]
    assert raws and all(p.exists() for p in raws)
    # their sessions' host-speed files (format 17) leave with them; another session's stays
    speeds = []
    for number, name in enumerate(first):  # the fixture's records predate session ids
        data = json.loads((results / "records" / name).read_text())
        data["metadata"]["session_id"] = f"session{number}"
        (results / "records" / name).write_text(json.dumps(data))
        speeds.append(results / "raw" / f"speed-session{number}.json")
    for path in [*speeds, results / "raw" / "speed-another.json"]:
        path.write_text("{}")
    assert ask.retire(changed, results, IDENT) == first
    assert not any((results / "records" / n).exists() for n in first)
    assert not any(p.exists() for p in raws)
    assert not any(p.exists() for p in speeds)
    assert (results / "raw" / "speed-another.json").exists()


def _writer(
    results: Path, statuses: dict[str, int], start: int = 0, who: dict = IDENT
) -> ask.Runner:
    """A fake harness: writes one real record per question (from DB_C50[start]) as machine
    `who`'s, exits as told."""
    sources = iter(DB_C50[start:])

    def run(q: ask.Question, env: dict[str, str]) -> int:
        assert env["RESULTS"] == str(results)
        _record(results, next(sources), who)
        if statuses.get(q.id) == 130:
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C reaches the campaign too
        return statuses.get(q.id, 0)

    return run


def test_a_failed_question_is_recorded_and_the_campaign_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second of three questions fails: the third is still asked, the ledger says
    which failed, the report is rebuilt, the exit status is 1; run again, only the failed
    one is asked."""
    monkeypatch.setattr(ask, "identity", lambda: IDENT)
    third = BENCH.replace('id = "direct"', 'id = "again"').replace('"5"', '"7"')
    campaign = load_campaign(_campaign(tmp_path, BENCH + STUDY + third))
    finished: list[Path] = []
    runner = _writer(campaign.results, {"study-sync-vs-gevent": 1})
    status = ask.run_campaign(campaign, False, runner, lambda p, shot: finished.append(p) or 0)
    assert status == 1 and finished == [campaign.results]
    ledger = ask.read_ledger(campaign.results)
    assert [(e["question"], e["status"]) for e in ledger] == [
        ("direct", "answered"),
        ("study-sync-vs-gevent", "failed (exit 1)"),
        ("again", "answered"),
    ]
    asked: list[str] = []
    ask.run_campaign(campaign, False, lambda q, env: asked.append(q.id) or 1, lambda p, shot: 0)
    assert asked == ["study-sync-vs-gevent"]


def test_minutes_asks_what_fits_and_leaves_the_rest_for_the_next_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """MINUTES= is the session's allotment: the study does not fit in what the first
    question left and waits (said so, nothing recorded for it), the third fits and is asked;
    the next make reference asks the study. Each question takes its estimate on a fake
    clock."""
    monkeypatch.setattr(ask, "identity", lambda: IDENT)
    third = BENCH.replace('id = "direct"', 'id = "again"').replace('"5"', '"3"')
    campaign = load_campaign(_campaign(tmp_path, BENCH + STUDY + third))
    est = {s.question.id: s.minutes for s in ask.plan(campaign, IDENT)}
    assert est["study-sync-vs-gevent"] > est["again"] + 1, est
    allotted = math.ceil(est["direct"] + est["again"])
    assert est["direct"] + est["study-sync-vs-gevent"] > allotted
    now = [0.0]
    written = _writer(campaign.results, {})

    def run(q: ask.Question, env: dict[str, str]) -> int:
        now[0] += est[q.id] * 60
        return written(q, env)

    status = ask.run_campaign(campaign, False, run, lambda p, s: 0, allotted, lambda: now[0])
    out = capsys.readouterr().out
    assert status == 0
    assert [e["question"] for e in ask.read_ledger(campaign.results)] == ["direct", "again"]
    assert f"MINUTES={allotted}: asks direct, again" in out
    assert "waits: study-sync-vs-gevent" in out
    assert "study-sync-vs-gevent: not asked now: about" in out and "the next make reference" in out
    asked: list[str] = []
    ask.run_campaign(campaign, False, lambda q, env: asked.append(q.id) or 1, lambda p, s: 0)
    assert asked == ["study-sync-vs-gevent"]


def test_minutes_plans_with_what_a_question_took_when_it_was_longer_than_its_estimate(
    tmp_path: Path,
) -> None:
    """The estimate leaves server starts out: a question that took 40 min when last answered
    under today's command (on any machine) is planned at 40; a line of another command, or
    not answered, says nothing."""
    third = BENCH.replace('id = "direct"', 'id = "again"').replace('"5"', '"3"')
    campaign = load_campaign(_campaign(tmp_path, BENCH + third))
    steps = ask.plan(campaign, IDENT)
    again = steps[1].question
    assert steps[1].minutes < 40
    line = {
        "question": "again",
        "status": "answered",
        "fingerprint": again.fingerprint(),
        "definition": again.definition(),
        "identity": {"machine_id": "another"},
        "started_at": "2026-11-28T08:00:00Z",
        "ended_at": "2026-11-28T08:40:00Z",
    }
    older = dict(line, fingerprint="another command", ended_at="2026-11-28T10:00:00Z")
    failed = dict(line, status="failed (exit 1)", ended_at="2026-11-28T10:00:00Z")
    ledger = [line, older, failed]
    assert ask.took_minutes(again, ledger) == 40.0
    assert ask.took_minutes(steps[0].question, ledger) is None
    assert ask.expected_minutes(steps[1], ledger) == 40.0
    assert ask.expected_minutes(steps[0], ledger) == steps[0].minutes
    text = ask.allotment_line(steps, 39, ledger)
    assert text.startswith("MINUTES=39: asks direct (") and text.endswith("waits: again")
    assert ask.allotment_line(steps, 39, []).startswith("MINUTES=39: asks direct, again")


def test_leaders_answered_earlier_in_the_same_campaign_are_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing answered yet: the plan cannot name behind-nginx's servers, but by its turn
    direct has been answered in this campaign, so it is asked with direct's leader (each
    question is planned again as its turn comes, from the ledger as it is then)."""
    monkeypatch.setattr(ask, "identity", lambda: IDENT)
    campaign = load_campaign(_campaign(tmp_path, BENCH + LEADERS))
    assert ask.plan(campaign, IDENT)[1].servers is None
    written = _writer(campaign.results, {}, start=1)  # DB_C50[1]: gunicorn-gthread
    seen: dict[str, str] = {}

    def run(q: ask.Question, env: dict[str, str]) -> int:
        seen[q.id] = env.get("SERVER", "")
        return written(q, env)

    assert ask.run_campaign(campaign, False, run, lambda p, shot: 0) == 0
    served = json.loads(DB_C50[1].read_text())["server"]
    assert seen == {"direct": "granian,gunicorn-sync", "behind-nginx": served}


def test_ctrl_c_stops_the_campaign_between_questions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGINT while the first question runs: its harness stops itself (exit 130, recorded
    interrupted), no further question is asked, no report, exit 130."""
    monkeypatch.setattr(ask, "identity", lambda: IDENT)
    campaign = load_campaign(_campaign(tmp_path, BENCH + STUDY))
    finished: list[Path] = []
    runner = _writer(campaign.results, {"direct": 130})
    before = signal.getsignal(signal.SIGINT)
    status = ask.run_campaign(campaign, False, runner, lambda p, shot: finished.append(p) or 0)
    assert status == 130 and not finished
    assert [e["status"] for e in ask.read_ledger(campaign.results)] == ["interrupted"]
    assert signal.getsignal(signal.SIGINT) is before


def test_dry_run_prints_the_plan_and_runs_nothing(tmp_path: Path) -> None:
    """make reference DRY_RUN=1, as make runs it: the plan of reference.toml, exit 0, no
    ledger written."""
    before = (ROOT / "results" / "reference" / ask.LEDGER).exists()
    env = {k: v for k, v in os.environ.items() if k not in BY_NAME}
    done = subprocess.run(
        [sys.executable, "-m", "bench", "reference", "--from-env"],
        cwd=ROOT,
        env=env | {"DRY_RUN": "1"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "make bench SERVER=all SCENARIO=plaintext,db CONCURRENCY=10,50" in done.stdout
    assert f"{len(load_campaign(CAMPAIGN_FILE).questions)} questions" in done.stdout
    assert (ROOT / "results" / "reference" / ask.LEDGER).exists() == before


@pytest.mark.parametrize(
    ("variables", "message"),
    [
        ({"DRY_RUN": "maybe"}, "DRY_RUN"),
        ({"SERVER": "granian"}, "SERVER: not with make reference"),
        ({"MINUTES": "0"}, "MINUTES=0 is out of range 1..1440"),
        ({"MINUTES": "an hour"}, "MINUTES='an hour' is not a whole number (1..1440)"),
    ],
)
def test_make_reference_refuses_bad_input_before_set_up(
    variables: dict[str, str], message: str
) -> None:
    """The pre-check (standard library only) exits 2 with one line."""
    env = {k: v for k, v in os.environ.items() if k not in BY_NAME} | variables
    done = subprocess.run(
        [sys.executable, "-S", "-m", "bench.precheck", "reference"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    assert message in done.stderr and done.stderr.count("\n") == 1


def test_summary_says_which_questions_are_answered_and_which_are_not_asked(tmp_path: Path) -> None:
    """The summary's Reference campaign line: how many questions are answered here and which,
    on which machine, how many are not asked yet (nothing answers them) with a link; its
    detail file: a question the ledger answered with its status, machine and records still
    present, one never asked with "not asked yet" and its make command. A directory without a
    ledger (a user's own runs) has neither."""
    from bench.report import campaign as shown

    path = _campaign(tmp_path, BENCH + "\n" + STUDY)
    results = tmp_path / "ref"
    assert shown.summary_lines(results, path) == [] and shown.detail_lines(results, path) == []
    (results / "records").mkdir(parents=True)
    (results / "records" / "a.json").write_text("{}")
    entry = {
        "question": "direct",
        "fingerprint": load_campaign(path).questions[0].fingerprint(),
        "identity": IDENT,
        "status": "answered",
        "records": ["a.json", "gone.json"],
        "ended_at": "2026-11-26T12:00:00Z",
    }
    (results / ask.LEDGER).write_text(json.dumps(entry) + "\n")
    line = "\n".join(shown.summary_lines(results, path))
    assert line.startswith(
        "**Reference campaign**: 1 of reference.toml's 2 questions answered here (direct), on "
        "1 machine(s) (abcdef01 (Test CPU, 2 CPUs)); 1 not asked yet: nothing in this summary "
        "answers them ([the questions and their commands](details/campaign.md))."
    )
    text = "\n".join(shown.detail_lines(results, path))
    row = "| direct | answered | abcdef01 (Test CPU, 2 CPUs) | 2026-11-26T12:00:00Z | 1 of 2 |"
    assert row in text
    assert "| study-sync-vs-gevent | not asked yet |" in text
    assert "- `make study NAME=sync-vs-gevent TRIALS=auto BUDGET=10`" in text
    failed = dict(entry, status="failed (exit 1)")
    (results / ask.LEDGER).write_text(json.dumps(failed) + "\n")
    line = "\n".join(shown.summary_lines(results, path))
    assert "0 of reference.toml's 2 questions answered here (none)" in line
    assert "asked but not answered: direct (failed (exit 1))" in line


def test_another_machines_campaign_is_kept_apart_until_it_answers_everything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """results/reference holds a question answered on another machine (issue 32: one label
    over an AMD and an Intel host): this machine's campaign is asked in
    pending-machines/<this machine>/, never beside that one's records; neither summary reads
    the other's records. Once it has answered more questions than the other (here: every
    question) it takes results/reference's place
    and the other machine's campaign moves to pending-machines/<that machine>/, where that
    machine resumes it (asking only what it had not answered). A question that only failed
    on the other machine does not make results/reference that machine's."""
    from bench.core.record import load_records
    from bench.report import campaign as shown

    files = tmp_path / "reference.toml"
    files.write_text(f'results = "{tmp_path / "results" / "reference"}"\n\n{BENCH + STUDY}')
    campaign = load_campaign(files)
    top = campaign.results
    intel = {**IDENT, "cpu_model": "Intel(R) Xeon(R) Processor"}
    monkeypatch.setattr(ask, "identity", lambda: IDENT)
    failed = {"question": "direct", "identity": intel, "status": "failed (exit 1)", "exit": 1}
    ask.append_ledger(top, failed)
    assert ask.home(top, IDENT) == top  # a failed question is no answer
    # the Intel machine answered `direct` in results/reference
    name = _record(top, DB_C50[0], intel)
    answered = {**failed, "status": "answered", "exit": 0, "records": [name]}
    answered["fingerprint"] = campaign.questions[0].fingerprint()
    ask.append_ledger(top, answered)
    mine = top / "pending-machines" / "abcdef01-test-cpu-2cpu"
    assert ask.home(top, IDENT) == mine
    assert ask.run_campaign(campaign, True, lambda q, e: 1, None) == 0  # DRY_RUN: the plan
    out = capsys.readouterr().out
    assert f"this machine's campaign is kept apart in {mine}" in out
    assert "Intel(R) Xeon(R) Processor, 2 CPUs): 1 question(s)" in out
    assert "2 to run, 0 skipped" in out

    # this machine answers `direct` only (the study fails): it stays apart
    finished: list[tuple[Path, bool]] = []
    runner = _writer(mine, {"study-sync-vs-gevent": 1})
    status = ask.run_campaign(campaign, False, runner, lambda p, s: finished.append((p, s)) or 0)
    assert status == 1 and finished == [(mine, False)]
    assert [r.metadata["cpu_model"] for r in load_records(top)[0]] == [intel["cpu_model"]]
    assert {r.metadata["cpu_model"] for r in load_records(mine)[0]} == {"Test CPU"}
    with_ref = load_records(tmp_path / "results", with_reference=True)[0]  # REFERENCE=1
    assert {r.metadata["cpu_model"] for r in with_ref} == {intel["cpu_model"]}
    lines = "\n".join(shown.summary_lines(top, files))
    assert "Also under way on machine abcdef01 (Test CPU, 2 CPUs): 1 of 2 questions" in lines
    assert "(pending-machines/abcdef01-test-cpu-2cpu/summary.md)" in lines
    assert "kept apart from results/reference" in "\n".join(shown.summary_lines(mine, files))

    # asked again, it answers the rest: it becomes results/reference, Intel's moves apart
    (top / "plots").mkdir()
    (top / "plots" / "intel-only.png").write_bytes(b"")  # rendered from Intel's records
    finished.clear()
    runner = _writer(mine, {}, start=2)
    status = ask.run_campaign(campaign, False, runner, lambda p, s: finished.append((p, s)) or 0)
    theirs = top / "pending-machines" / "abcdef01-intel-r-xeon-r-processor-2cpu"
    assert status == 0 and finished == [(top, True), (theirs, False)]
    assert not mine.exists() and not (top / "plots").exists()
    assert {r.metadata["cpu_model"] for r in load_records(top)[0]} == {"Test CPU"}
    assert [r.metadata["cpu_model"] for r in load_records(theirs)[0]] == [intel["cpu_model"]]
    assert [e["question"] for e in ask.read_ledger(theirs)] == ["direct", "direct"]
    assert ask.home(top, IDENT) == top
    # on the Intel machine: its own campaign, where it stopped
    assert ask.home(top, intel) == theirs
    steps = ask.plan(replace(campaign, results=theirs), intel)
    assert [s.ask for s in steps] == [False, True]


def test_the_reference_is_the_campaign_that_answered_the_most_questions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 32's two machines live one session each: AMD's campaign, kept apart, answered 22
    of 23 questions while results/reference stayed Intel's 17, since only a campaign that
    answered every question took its place. Now a session's finish, on whichever machine,
    puts the campaign that has answered the most questions in results/reference: here the
    Intel machine's session (its question fails) hands it to AMD's, and its own campaign
    moves apart where it resumes. A tie leaves results/reference as it is."""
    from bench.core.record import load_records

    files = tmp_path / "reference.toml"
    files.write_text(f'results = "{tmp_path / "results" / "reference"}"\n\n{BENCH + STUDY}')
    campaign = load_campaign(files)
    top = campaign.results
    intel = {**IDENT, "cpu_model": "Intel(R) Xeon(R) Processor"}
    amd = top / "pending-machines" / "abcdef01-test-cpu-2cpu"

    def answer(results: Path, index: int, source: Path, who: dict) -> None:
        q = campaign.questions[index]
        entry = {"question": q.id, "identity": who, "status": "answered", "exit": 0}
        entry |= {"fingerprint": q.fingerprint(), "records": [_record(results, source, who)]}
        ask.append_ledger(results, entry)

    answer(top, 0, DB_C50[0], intel)
    answer(amd, 0, DB_C50[1], IDENT)
    monkeypatch.setattr(ask, "identity", lambda: intel)
    finished: list[tuple[Path, bool]] = []

    def render(path: Path, picture: bool) -> int:
        finished.append((path, picture))
        return 0

    fails = {campaign.questions[1].id: 1}
    # 1 answered each: a tie, results/reference stays Intel's
    assert ask.run_campaign(campaign, False, _writer(top, fails, 2, intel), render) == 1
    assert finished == [(top, True)] and amd.is_dir()
    assert {r.metadata["cpu_model"] for r in load_records(top)[0]} == {intel["cpu_model"]}

    # AMD answers its study in another session: 2 against Intel's 1
    answer(amd, 1, DB_C50[3], IDENT)
    finished.clear()
    assert ask.run_campaign(campaign, False, _writer(top, fails, 4, intel), render) == 1
    theirs = top / "pending-machines" / "abcdef01-intel-r-xeon-r-processor-2cpu"
    assert finished == [(top, True), (theirs, False)]
    assert not amd.exists()
    assert {r.metadata["cpu_model"] for r in load_records(top)[0]} == {"Test CPU"}
    assert {r.metadata["cpu_model"] for r in load_records(theirs)[0]} == {intel["cpu_model"]}
    assert ask.answered_count(campaign, top, IDENT) == 2
    assert ask.answered_count(campaign, theirs, intel) == 1
    assert ask.home(top, intel) == theirs  # the Intel machine resumes its own campaign apart


def test_a_pending_campaigns_records_are_read_only_as_their_own(tmp_path: Path) -> None:
    """Records below results/reference/pending-machines/ are neither the reference's nor, with
    REFERENCE=1, the user's; read as their own RESULTS they are."""
    from bench.core.record import load_records
    from bench.report.inputs import has_record_files

    pending = tmp_path / "reference" / "pending-machines" / "abcdef01-test-cpu-2cpu"
    _record(pending, DB_C50[0])
    assert not has_record_files(tmp_path, with_reference=True)
    assert not has_record_files(tmp_path / "reference")
    assert load_records(tmp_path, with_reference=True) == ([], [])
    assert load_records(tmp_path / "reference") == ([], [])
    assert has_record_files(pending) and len(load_records(pending)[0]) == 1


@pytest.mark.parametrize(
    ("failed_arm", "answered"),
    [("uvicorn-cpus-mem", True), ("granian-quota-mem", True), ("uvicorn-cpus-50", False)],
)
def test_a_study_that_failed_only_where_it_measures_failure_is_answered(
    tmp_path: Path, failed_arm: str, answered: bool
) -> None:
    """The AMD campaign's container-limits (2026-11-28) was written "failed (exit 1)": its
    default worker rule's arms were brought down by OOM kills under the memory limit, which
    its checks count on failed runs. make study now exits 0 for that; a ledger line written
    before is read as answered, with what was written kept, so make reference does not retire
    its records and ask it again. A failed run of an arm no such check names keeps it failed."""
    results = tmp_path / "ref"
    names = [_record(results, source) for source in DB_C50[:2]]
    for name, (arm, status) in zip(
        names, [("gunicorn-sync-quota-mem", "ok"), (failed_arm, "failed")], strict=True
    ):
        path = results / "records" / name
        data = json.loads(path.read_text())
        data["metadata"] |= {"study": "container-limits", "study_arm": arm}
        data["status"] = status
        path.write_text(json.dumps(data))
    line = {
        "question": "study-container-limits",
        "command": "make study NAME=container-limits TRIALS=auto BUDGET=45",
        "status": "failed (exit 1)",
        "exit": 1,
        "records": names,
        "identity": IDENT,
    }
    (results / "campaign.jsonl").write_text(json.dumps(line) + "\n")
    (entry,) = ask.read_ledger(results)
    if answered:
        assert (entry["status"], entry["exit"]) == ("answered", 0)
        assert entry["written"] == {"status": "failed (exit 1)", "exit": 1}
    else:
        assert entry == line
    # the file is never rewritten: what was written stays as written
    assert json.loads((results / "campaign.jsonl").read_text()) == line


def test_a_study_in_containers_has_its_missing_images_built_before_it_is_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The Intel campaign of 2026-11-28 asked container-limits on a machine that had never
    run `make images`: the study refused at once (exit 2, "no current image of ...") and the
    question waited for a hand-typed command. make reference now builds what the study's
    container arms lack first, one `images` invocation per python, without the question's own
    variables; a failed build is the question's status and the study is not started. Other
    questions build nothing."""
    from bench.studies import runner

    by_id = {q.id: q for q in load_campaign().questions}
    study, bench = by_id["study-container-limits"], by_id["direct"]
    missing = {None: ["granian", "uvicorn"], "3.14t": ["gunicorn-gthread"]}
    monkeypatch.setattr(runner, "missing_images", lambda studies: missing)
    assert ask.image_builds(bench) == []
    assert ask.image_builds(study) == [
        {"SERVER": "granian,uvicorn"},
        {"SERVER": "gunicorn-gthread", "PYTHON": "3.14t"},
    ]
    calls: list[tuple[list[str], dict[str, str]]] = []
    statuses = iter([0, 0, 0])

    def run(argv: list[str], env: dict[str, str], cwd: Path, check: bool) -> object:
        calls.append((argv, env))
        return subprocess.CompletedProcess(argv, next(statuses))

    monkeypatch.setattr(ask.subprocess, "run", run)
    env = {"NAME": "container-limits", "TRIALS": "auto", "BUDGET": "45", "HOME": "h"}
    assert ask.run_harness(study, env) == 0
    assert [argv[3] for argv, _ in calls] == ["images", "images", "study"]
    assert calls[0][1] == {"HOME": "h", "SERVER": "granian,uvicorn"}
    assert calls[1][1] == {"HOME": "h", "SERVER": "gunicorn-gthread", "PYTHON": "3.14t"}
    assert calls[2][1] == env
    # a failed build: its status, the study not started
    calls.clear()
    statuses = iter([0, 1])
    assert ask.run_harness(study, env) == 1
    assert [argv[3] for argv, _ in calls] == ["images", "images"]
