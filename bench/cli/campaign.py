"""`make reference`: the campaign of reference.toml asked question by question, resumable.

Input: the Campaign (bench/core/campaign.py), this machine's identity, and the campaign's
ledger, RESULTS/campaign.jsonl (one JSON line per question asked: its fingerprint, the
machine's identity, exit status and the record files it wrote). Output: the plan (DRY_RUN=1:
each question, its command, skipped or to run and why, the estimated minutes), or each
question run as its own harness invocation (`python -m bench <command> --from-env`, so each is
answered within one session and handles Ctrl-C itself), then summary.md, index.html and the
picture of the report. Exit status: 0 every question answered, 1 one failed (the others
still asked), 130 interrupted (stopped between questions).

A reference is one machine's (issue 32 found two hosts pooled under one label). When
results/reference holds a question answered on another machine, this machine's campaign is
asked in results/reference/pending-machines/<machine>/ (its own ledger, records and summary,
never read with the reference): machines that live for one session each go on answering,
and the campaign that has answered the most questions is results/reference: a pending one
takes its place when it has answered more than the machine results/reference holds (lead():
each session's finish looks, whichever machine it runs on), the campaign it replaces kept in
pending-machines/ for its machine to resume.

A question is answered, and skipped, when the ledger's latest line for it on this machine
says it exited 0 with the same fingerprint (same target and variables) and, for a study, the
same definition (its study file's text; a line written before the ledger kept it, without
one, is taken as asked under today's file), and every record file it names is still in
RESULTS/records, loads, and carries this machine's identity. A
question asked again because its command changed, or because it was not answered, retires
the records of its earlier askings on this machine first (`retire`: the summary reads every
record below RESULTS, and the old session would be judged beside the new one); the ledger
line names them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

from bench.core import defaults, variables
from bench.core.campaign import (
    LEADERS,
    LEDGER,
    ROOT,
    STAND_IN,
    Campaign,
    Question,
    machine_text,
    read_ledger,
)
from bench.core.record import PENDING_DIR, Record, RecordError, session_of
from bench.host.images import images_command
from bench.host.metadata import cpu_model, machine_id, now_iso
from bench.report import standings
from bench.report.groups import BASELINES, groups, rank_groups, starved

Runner = Callable[[Question, dict[str, str]], int]


def identity() -> dict[str, object]:
    """This machine as the campaign tells machines apart: the hashed machine id, the CPU
    model and count (cloned images share /etc/machine-id: issue 32 found one label on two
    hosts, AMD and Intel)."""
    return {"machine_id": machine_id(), "cpu_model": cpu_model(), "cpu_count": os.cpu_count()}


def record_identity(rec: Record) -> dict[str, object]:
    """A record's machine identity, as identity() says it."""
    meta = rec.metadata
    return {k: meta.get(k) for k in ("machine_id", "cpu_model", "cpu_count")}


def append_ledger(results: Path, entry: dict) -> None:
    """One line more (appended whole, so an interrupted campaign leaves whole lines)."""
    results.mkdir(parents=True, exist_ok=True)
    with open(results / LEDGER, "a") as out:
        out.write(json.dumps(entry, sort_keys=True) + "\n")


def latest_entry(ledger: list[dict], qid: str, ident: dict[str, object]) -> dict | None:
    """The ledger's latest line for question `qid` on this machine."""
    mine = [e for e in ledger if e.get("question") == qid and e.get("identity") == ident]
    return mine[-1] if mine else None


def entry_records(results: Path, entry: dict) -> tuple[list[Record], str | None]:
    """The records a ledger line names, or why they are not all there."""
    records = []
    for name in entry.get("records", []):
        try:
            records.append(Record.from_dict(json.loads((results / "records" / name).read_text())))
        except (OSError, ValueError, RecordError, TypeError):
            return [], f"record {name} is missing or unreadable"
    return records, None


def changed(q: Question, entry: dict) -> str | None:
    """Why the ledger line `entry` asked another question than `q` is today, or None."""
    if entry.get("fingerprint") != q.fingerprint():
        return "its command changed since it was asked"
    if entry.get("definition") not in (None, q.definition()):
        return "its study file changed since it was asked"
    return None


def took_minutes(q: Question, ledger: list[dict]) -> float | None:
    """How long `q` took when it was last answered under today's command, on any machine of
    the ledger (its started_at to ended_at), or None. The estimate leaves server starts out
    (cpu-quota's 58 arms took 34 min against 25); MINUTES= plans with the larger of the two."""
    for entry in reversed(ledger):
        if entry.get("question") != q.id or entry.get("status") != "answered":
            continue
        if changed(q, entry) is not None:
            continue
        try:
            start = datetime.fromisoformat(str(entry["started_at"]))
            end = datetime.fromisoformat(str(entry["ended_at"]))
        except (KeyError, ValueError):
            continue
        return max(0.0, (end - start).total_seconds() / 60)
    return None


def expected_minutes(step: Step, ledger: list[dict]) -> float:
    """A question's minutes as MINUTES= plans them: its estimate, or what it took when last
    answered (any machine) where that was longer."""
    return max(step.minutes, took_minutes(step.question, ledger) or 0.0)


def answered(q: Question, results: Path, ledger: list[dict], ident: dict) -> tuple[bool, str]:
    """Whether `q` is answered here (see the module's docstring), and why (not)."""
    entry = latest_entry(ledger, q.id, ident)
    if entry is None:
        return False, "not asked on this machine yet"
    if (why := changed(q, entry)) is not None:
        return False, why
    if entry.get("status") != "answered":
        return False, f"last asked {entry.get('ended_at', '?')}: {entry.get('status')}"
    records, problem = entry_records(results, entry)
    if problem:
        return False, problem
    if any(record_identity(r) != ident for r in records):
        return False, "a record it names is of another machine"
    sessions = {session_of(r) for r in records}
    return True, (
        f"answered {entry.get('ended_at', '?')}: {len(records):,} records, "
        f"{len(sessions)} session(s)"
    )


def leaders(q: Question, results: Path, ledger: list[dict], ident: dict) -> list[str] | None:
    """SERVER=@leaders resolved: the servers of the `top` configurations ranked first among
    the records of the question named, at its scenario and concurrency (starved and baseline
    servers left out): by its race's ranking where it was raced (bench.report.standings, the
    read-out the recommendations use: those the race left first, then those it screened
    out), by req/s otherwise (bench.report.groups.rank_groups); None: not known (that
    question is not answered here). A question whose harness exited 1 counts: a run
    of one server failed (its record says why, the question is asked again next time), the
    others were measured and rank as they would have."""
    assert q.leaders is not None
    entry = latest_entry(ledger, q.leaders.question, ident)
    if entry is None or entry.get("exit", 0 if entry.get("status") == "answered" else None) not in (
        0,
        1,
    ):
        return None
    records, problem = entry_records(results, entry)
    point = [
        r
        for r in records
        if r.scenario == q.leaders.scenario and r.concurrency == q.leaders.concurrency
    ]
    members = {
        k: g for k, g in groups(point).items() if not starved(g) and g[0].server not in BASELINES
    }
    race = standings.raced_point(members)
    if race is not None:
        names = [name.split(" ")[0] for name in race.standing.ranking]
    else:
        by_rps, _ = rank_groups(members)
        order = sorted(by_rps.values(), key=lambda r: (r.low, r.high))
        names = [members[ranked.key][0].server for ranked in order]  # type: ignore[index]
    chosen = list(dict.fromkeys(names))
    return chosen[: q.leaders.top] if not problem and chosen else None


def estimate_minutes(q: Question, results: Path, servers: int | None) -> float:
    """The question's measured minutes at most (server starts and set-up on top): a bench or
    capacity plan as variables.plan_seconds counts it, a study's rounds as its file costs
    them (at least defaults.AUTO_MIN_TRIALS, and one round of its race arms' probes and gaps)
    or BUDGET, plus its tuned arms' searches (run before the race, each its [tune] budget),
    make tune's BUDGET per server."""
    given = dict(q.variables, RESULTS=str(results))
    if given.get("SERVER") == LEADERS:
        given["SERVER"] = STAND_IN
    values = variables.check(q.command, given)
    if servers is not None:
        values["SERVER"] = tuple(str(i) for i in range(servers))
    budget_s = int(values.get("BUDGET") or defaults.AUTO_BUDGET_MIN) * 60  # type: ignore[call-overload]
    if q.target == "tune":
        return budget_s * len(values["SERVER"]) / 60  # type: ignore[arg-type]
    if q.target == "study":
        from bench.studies.cost import measured_seconds, race_round_seconds, search_seconds
        from bench.studies.schema import load_study

        studies = [load_study(n) for n in values["NAME"]]  # type: ignore[union-attr]
        least = sum(
            measured_seconds(s, defaults.AUTO_MIN_TRIALS) + race_round_seconds(s) for s in studies
        )
        searches = sum(search_seconds(s) for s in studies)
        return (max(budget_s * len(studies), least) + searches) / 60
    return variables.plan_seconds(q.command, values) / 60


@dataclass(frozen=True)
class Step:
    """One question in the plan: ask it or skip it, and why."""

    question: Question
    ask: bool
    why: str
    servers: list[str] | None  # SERVER=@leaders resolved (None: not resolved or not asked)
    minutes: float


def plan_step(q: Question, results: Path, ledger: list[dict], ident: dict) -> Step:
    """One question, asked or skipped, and why, with its estimated minutes (reads that
    question's records only, and those of the question its @leaders names)."""
    done, why = answered(q, results, ledger, ident)
    servers = None
    if q.leaders is not None and not done:
        servers = leaders(q, results, ledger, ident)
        if servers is None:
            top, source = q.leaders.top, q.leaders.question
            why += f"; SERVER: the {top} leaders of {source}, once it is answered"
    count = len(servers) if servers else (q.leaders.top if q.leaders else None)
    minutes = 0.0 if done else estimate_minutes(q, results, count)
    return Step(q, not done, why, servers, minutes)


def plan(campaign: Campaign, ident: dict) -> list[Step]:
    """Each question, asked or skipped, and why, with its estimated minutes."""
    ledger = read_ledger(campaign.results)
    return [plan_step(q, campaign.results, ledger, ident) for q in campaign.questions]


def other_machines(results: Path, ident: dict) -> dict[str, list[str]]:
    """The machines other than this one with a question answered in RESULTS (their identity
    as text -> the questions)."""
    found: dict[str, list[str]] = {}
    for entry in read_ledger(results):
        other = entry.get("identity") or {}
        if entry.get("status") != "answered" or other == ident:
            continue
        questions = found.setdefault(machine_text(other), [])
        if entry.get("question") not in questions:
            questions.append(str(entry.get("question")))
    return found


def machine_key(ident: dict) -> str:
    """A machine identity as a directory name: the hashed id's first 8 characters, the CPU
    model and count (`a5adb7fd-intel-r-xeon-r-processor-2cpu`)."""
    model = re.sub(r"[^a-z0-9]+", "-", str(ident.get("cpu_model") or "unknown").lower())
    mid = re.sub(r"[^a-z0-9]", "", str(ident.get("machine_id") or "unknown").lower())[:8]
    return f"{mid or 'unknown'}-{model.strip('-')[:40] or 'unknown'}-{ident.get('cpu_count', 0)}cpu"


def home(top: Path, ident: dict) -> Path:
    """Where this machine's campaign is asked: `top` (results/reference), unless it holds a
    question answered on another machine — a reference is one machine's (issue 32 found two
    hosts under one label) — then top/pending-machines/<this machine>/, a results directory of
    its own (ledger, records, summary) that promote() puts in top's place once it has
    answered more questions than top's machine (lead())."""
    if not other_machines(top, ident):
        return top
    return top / PENDING_DIR / machine_key(ident)


# What write_summary renders in a results directory (made again from the records; everything
# else there — records/, raw/, tuned/, the ledger — is what was measured)
RENDERED = ("summary.md", "details", "plots", "index.html")


def _move_into(src: Path, dst: Path, keep: tuple[str, ...] = (*RENDERED, PENDING_DIR)) -> None:
    """Everything measured in `src` moved into `dst` (`keep`, at its top: rendered files and
    pending campaigns, stay): directories merged file by file, ledgers appended line by line."""
    dst.mkdir(parents=True, exist_ok=True)
    for path in sorted(src.iterdir()):
        if path.name in keep:
            continue
        target = dst / path.name
        if path.is_dir() and target.is_dir():
            _move_into(path, target, ())
            path.rmdir()
        elif path.name == LEDGER and target.exists():
            with open(target, "a") as out:
                out.write(path.read_text())
            path.unlink()
        else:
            os.replace(path, target)


def holder(results: Path) -> dict | None:
    """The machine whose campaign RESULTS holds: the identity of most of its ledger's
    answered lines, or None (nothing answered there)."""
    answers = [
        json.dumps(e.get("identity") or {}, sort_keys=True)
        for e in read_ledger(results)
        if e.get("status") == "answered"
    ]
    return json.loads(Counter(answers).most_common(1)[0][0]) if answers else None


def answered_count(campaign: Campaign, results: Path, ident: dict) -> int:
    """How many of the campaign's questions are answered in RESULTS on machine `ident`
    (answered(): today's command and study file, every record present and of that machine)."""
    ledger = read_ledger(results)
    return sum(answered(q, results, ledger, ident)[0] for q in campaign.questions)


def lead(top: Path, campaign: Campaign) -> tuple[Path, dict, int] | None:
    """The pending campaign that takes top's place, with its machine and count: the one that has
    answered the most questions, when that is more than top's machine has answered in top (a
    tie leaves top as it is, so two machines never swap on equal counts); None: top stays.
    The reference shown is then always the most complete one machine's campaign (AMD's 22 of
    23 waited behind Intel's 17 while the rule was "answers every question")."""
    ident = holder(top)
    best = answered_count(campaign, top, ident) if ident is not None else 0
    chosen = None
    pending = top / PENDING_DIR
    for folder in sorted(pending.iterdir()) if pending.is_dir() else []:
        who = holder(folder) if folder.is_dir() else None
        if who is None:
            continue
        count = answered_count(campaign, folder, who)
        if count > best:
            best, chosen = count, (folder, who, count)
    return chosen


def promote(top: Path, mine: Path, ident: dict) -> Path | None:
    """The pending campaign `mine` (of machine `ident`) has answered more questions than
    top's (lead()): what `top` held (the campaign of the machine that answered most of its
    questions) moves to top/pending-machines/<that machine>/, kept for it to resume, and
    `mine` takes its place. That directory, or None when top held no other machine's
    answers."""
    counts = Counter(
        machine_key(entry.get("identity") or {})
        for entry in read_ledger(top)
        if entry.get("status") == "answered" and (entry.get("identity") or {}) != ident
    )
    demoted = None
    if counts:
        demoted = top / PENDING_DIR / counts.most_common(1)[0][0]
        _move_into(top, demoted)
    for name in RENDERED:  # the other machine's summary and plots, rendered again by finish
        path = top / name
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    _move_into(mine, top)
    shutil.rmtree(mine)
    if not any((top / PENDING_DIR).iterdir()):
        (top / PENDING_DIR).rmdir()
    return demoted


def plan_lines(steps: list[Step], ident: dict) -> list[str]:
    """The plan as DRY_RUN=1 prints it."""
    lines = [
        f"reference campaign on machine {ident['machine_id']} ({ident['cpu_model']}, "
        f"{ident['cpu_count']} CPUs): {len(steps)} questions"
    ]
    for s in steps:
        shown = ",".join(s.servers) if s.servers else None
        state = "to run" if s.ask else "skipped"
        lines.append(f"- {s.question.id}: {state} ({s.why}); about {s.minutes:.0f} min")
        lines.append(f"    {s.question.make_line(shown)}")
    todo = [s for s in steps if s.ask]
    total = sum(s.minutes for s in todo)
    lines.append(
        f"{len(todo)} to run, {len(steps) - len(todo)} skipped; about {total:.0f} min of "
        "measured time (server starts and set-up on top)"
    )
    return lines


def allotment_line(steps: list[Step], minutes: int, ledger: list[dict]) -> str:
    """What MINUTES= lets this session ask, by the expected minutes in order (each question
    asked when it fits in what the ones before it left; the others wait for the next
    session)."""
    left, fitting, waiting = float(minutes), [], []
    for s in (s for s in steps if s.ask):
        need = expected_minutes(s, ledger)
        if need <= left:
            fitting.append(s.question.id)
            left -= need
        else:
            waiting.append(s.question.id)
    asked = ", ".join(fitting) or "none"
    line = f"MINUTES={minutes}: asks {asked} (about {minutes - left:.0f} min, server starts on top)"
    return line + (f"; waits: {', '.join(waiting)}" if waiting else "")


def child_env(q: Question, results: Path, servers: list[str] | None) -> dict[str, str]:
    """The environment of a question's harness: ours without any make variable, then the
    question's (MACHINE= stays: PYWEBBENCH_MACHINE)."""
    env = {k: v for k, v in os.environ.items() if k not in variables.BY_NAME}
    env.pop("PYWEBBENCH_CMDLINE", None)
    env |= q.variables
    env["RESULTS"] = str(results)
    if servers is not None:
        env["SERVER"] = ",".join(servers)
    return env


def image_builds(q: Question) -> list[dict[str, str]]:
    """The `make images` a study question needs before it is asked: the servers of its arms in
    containers whose current image is missing (bench.studies.runner.missing_images), as the
    variables of one `images` harness invocation per python. The Intel campaign of
    2026-11-28 asked container-limits on a machine that had never built them: the study
    refused at once (exit 2) and the question waited for a hand-typed `make images`. [] for
    other questions, and when the engine is missing (the study says so itself)."""
    if q.target != "study":
        return []
    from bench.studies.runner import missing_images
    from bench.studies.schema import StudyError, load_study

    try:
        studies = [load_study(name) for name in q.variables.get("NAME", "").split(",")]
        missing = missing_images(studies)
    except StudyError:
        return []
    return [
        {"SERVER": ",".join(servers)} | ({"PYTHON": python} if python else {})
        for python, servers in missing.items()
    ]


def run_harness(q: Question, env: dict[str, str]) -> int:
    """A question asked: the images it needs built first (image_builds, each its own `images`
    invocation; a failed build is the question's exit status), then its own harness
    invocation (one session), from the checkout."""
    plain = {k: v for k, v in env.items() if k not in variables.BY_NAME}
    for build in image_builds(q):
        made = images_command(build["SERVER"].split(","), build.get("PYTHON"))
        print(f"reference: {q.id}: building its images first: {made}")
        argv = [sys.executable, "-m", "bench", "images", "--from-env"]
        status = subprocess.run(argv, env=plain | build, cwd=ROOT, check=False).returncode
        if status != 0:
            return status
    argv = [sys.executable, "-m", "bench", q.command, "--from-env"]
    return subprocess.run(argv, env=env, cwd=ROOT, check=False).returncode


class Stop:
    """SIGINT while a question runs: that question's harness stops itself; the campaign
    stops after it, between questions."""

    def __init__(self) -> None:
        self.asked = False

    def __call__(self, signum: int, frame: object) -> None:
        self.asked = True


def retire(q: Question, results: Path, ident: dict) -> list[str]:
    """The records of this question's earlier askings on this machine under another command
    (its variables or its study file changed) or that were not answered (a run failed, or it
    was interrupted), removed from RESULTS with their raw files (and their session's speed
    file) as it is asked again: the summary reads every record below RESULTS, and a
    superseded session beside the new one would be judged beside it (git keeps the old ones).
    Those it removed, by name."""
    gone: list[str] = []
    for entry in read_ledger(results):
        if (
            entry.get("question") != q.id
            or entry.get("identity") != ident
            or (changed(q, entry) is None and entry.get("status") == "answered")
        ):
            continue
        for name in entry.get("records", []):
            path = results / "records" / name
            try:
                data = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            for raw in data.get("raw_files") or []:
                (results / raw).unlink(missing_ok=True)
            # its session's host-speed probes (format 17) go with it: a question is a session
            session = (data.get("metadata") or {}).get("session_id")
            if session:
                (results / "raw" / f"speed-{session}.json").unlink(missing_ok=True)
            path.unlink(missing_ok=True)
            gone.append(name)
    return gone


def ask(q: Question, step: Step, results: Path, ident: dict, runner: Runner) -> int:
    """One question asked and its ledger line written: the exit status of its harness."""
    records = results / "records"
    retired = retire(q, results, ident)
    if retired:
        print(
            f"reference: {q.id}: {len(retired):,} records of its earlier askings retired "
            "(its command changed, or it was not answered)"
        )
    before = set(records.glob("*.json")) if records.is_dir() else set()
    started = now_iso()
    print(f"reference: {q.id}: {q.make_line(','.join(step.servers) if step.servers else None)}")
    status = runner(q, child_env(q, results, step.servers))
    after = set(records.glob("*.json")) if records.is_dir() else set()
    written = sorted(p.name for p in after - before)
    word = {0: "answered", 130: "interrupted"}.get(status, f"failed (exit {status})")
    if status == 0 and not written:
        word = "failed (no record written)"
    entry = {
        "question": q.id,
        "fingerprint": q.fingerprint(),
        "definition": q.definition(),
        "identity": ident,
        "command": q.make_line(",".join(step.servers) if step.servers else None),
        "status": word,
        "exit": status,
        "records": written,
        "retired": retired,
        "started_at": started,
        "ended_at": now_iso(),
    }
    append_ledger(results, entry)
    print(f"reference: {q.id}: {word}, {len(written):,} records")
    return 0 if word == "answered" else (130 if status == 130 else 1)


def run_campaign(
    campaign: Campaign,
    dry_run: bool,
    runner: Runner = run_harness,
    finish: Callable[[Path, bool], int] | None = None,
    minutes: int | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> int:
    """The plan (dry_run), or every question not answered on this machine asked in order, in
    its home (results/reference, or its pending directory: home()), then `finish` over what
    was written (the summary; the picture of the report only for results/reference):
    0, 1 (a question failed) or 130. `minutes` (MINUTES=): the session's allotment; a
    question whose estimate does not fit in what is left of it waits for the next
    make reference (the ones after it that fit are asked)."""
    ident = identity()
    top = campaign.results
    here = home(top, ident)
    campaign = replace(campaign, results=here)
    took = _print_plan(campaign, top, ident, minutes)
    if dry_run:
        return 0
    stop = Stop()
    previous = signal.signal(signal.SIGINT, stop)
    worst = 0
    started = clock()
    try:
        for q in campaign.questions:
            if stop.asked:
                break
            # planned again as its turn comes: the questions asked before it may have
            # answered the one its @leaders names, or failed
            now = plan_step(q, campaign.results, read_ledger(campaign.results), ident)
            if not now.ask:
                continue
            left = None if minutes is None else minutes - (clock() - started) / 60
            need = expected_minutes(now, took)
            if left is not None and need > left:
                print(
                    f"reference: {q.id}: not asked now: about {need:.0f} min does not "
                    f"fit in the {max(0.0, left):.0f} min left of MINUTES={minutes}; the next "
                    "make reference asks it"
                )
                continue
            if q.leaders is not None and now.servers is None:
                print(f"reference: {q.id}: not asked: {now.why}")
                worst = max(worst, 1)
                continue
            worst = max(worst, ask(q, now, campaign.results, ident, runner))
            if worst == 130:
                break
    finally:
        signal.signal(signal.SIGINT, previous)
    if stop.asked or worst == 130:
        print("reference: interrupted; stopped between questions", file=sys.stderr)
        return 130
    return max(worst, _finish(top, here, campaign, finish))


def _print_plan(campaign: Campaign, top: Path, ident: dict, minutes: int | None) -> list[dict]:
    """The plan, what MINUTES= lets this session ask, and where a machine's campaign is kept
    apart; the ledger lines of what each question took when last answered (here, or on the
    machine top holds)."""
    here = campaign.results
    steps = plan(campaign, ident)
    print("\n".join(plan_lines(steps, ident)))
    took = read_ledger(here) + (read_ledger(top) if here != top else [])
    if minutes is not None:
        print(allotment_line(steps, minutes, took))
    if here != top:
        names = "; ".join(
            f"{n}: {len(q)} question(s)" for n, q in other_machines(top, ident).items()
        )
        print(
            f"reference: {top} is another machine's ({names}); this machine's campaign is kept "
            f"apart in {here} and takes its place once it has answered more questions than "
            "that machine"
        )
    return took


def _finish(
    top: Path,
    here: Path,
    campaign: Campaign,
    finish: Callable[[Path, bool], int] | None,
) -> int:
    """After the questions: the pending campaign that has answered more questions than top's
    takes top's place (lead, promote: this machine's or another's); the summaries of what
    changed are rendered (`finish`): top's (with the picture) when it is this machine's or
    changed hands, this machine's pending one, and the one moved apart."""
    demoted = None
    leader = lead(top, campaign)
    if leader is not None:
        folder, who, count = leader
        demoted = promote(top, folder, who)
        print(
            f"reference: the campaign of {machine_text(who)} has answered {count} of "
            f"{len(campaign.questions)} questions, more than any other: {top} is now its"
        )
        if demoted is not None:
            print(f"reference: the campaign {top} held is kept in {demoted}")
        if folder == here:
            here = top
    if finish is None:
        return 0
    rendered = list(dict.fromkeys(p for p in (top if leader else None, here, demoted) if p))
    return max(finish(path, path == top) for path in rendered)
