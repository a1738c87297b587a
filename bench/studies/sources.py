"""The summary's "Source documents": each seed document's claims beside ours, with verdicts.

Input: the records (any machines) and the study files; a study belongs to the seed document
its `source` names (`000_….txt` … `004_….txt`). Output: markdown lines for summary.md. Each
check's claim (the study file's, with the published figure), ours with its interval, and the
verdict come from the study's own judgement (bench.studies.verdict.outcomes over the records
its section shows: the latest run of each arm, a worker sweep collapsed to each server's
best), and the keep-alive race's from its fix decision (bench.studies.network): nothing is
judged here. The command for a study not measured yet is the reference.toml question that asks
it (bench.core.campaign: its make line, with that question's BUDGET), or, where no question
does, `make study NAME=… TRIALS=auto` at the default budget (AUTO_BUDGET_MIN minutes).
A document's verdict: reproduced or not reproduced when all its decided checks
agree, "differs" when they went both ways (with how our set-up differs, from the study file),
undecided when none was decided (with the reason per check); "not measured here" with the
command when its studies have no records.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache
from pathlib import Path

from bench.core.campaign import CAMPAIGN_FILE, CampaignError, load_campaign
from bench.core.defaults import AUTO_BUDGET_MIN
from bench.core.record import Record
from bench.report.cells import host_of
from bench.report.table import markdown_table
from bench.studies import network
from bench.studies.container import checks_of
from bench.studies.metrics import latest_run
from bench.studies.schema import Study, StudyError, load_study, study_names
from bench.studies.sections import collapse_groups
from bench.studies.verdict import ONE_TRIAL, Outcome, outcomes, tally
from bench.studies.verdict import verdict as verdict_of

SEED = re.compile(r"(\d{3})_[0-9a-f]+\.txt")
HEADING = "## Source documents"
SUBSTITUTIONS = (
    "Substitutions, said once: PostgreSQL behind pgbouncer stands for the documents' MySQL "
    "and Redis (000, 004); their external APIs are a local stub answering after the same "
    "wait; wrk and oha stand for Locust, ab and siege where a study says so; everything runs "
    "on loopback on this machine."
)
HEADER = ["claim (theirs, with their figure)", "ours (95 % interval, rounds)", "verdict"]
# A study's verdict word -> the document's: checks decided both ways "differ".
WORDS = {
    "partly reproduced": "differs",
    "inconclusive": "undecided",
    ONE_TRIAL: "undecided (one trial: cannot decide)",
}


def asked(path: Path = CAMPAIGN_FILE) -> dict[str, str]:
    """Study name -> the make line of the campaign question that asks it (reference.toml,
    read by bench.core.campaign); {} where the file cannot be read (not remembered: a read
    that failed once, with a study directory that lacked one of its studies, made every
    later summary of the process print the default BUDGET)."""
    try:
        return _asked(path)
    except CampaignError:
        return {}


@cache
def _asked(path: Path) -> dict[str, str]:
    """asked(), remembered per file once read; CampaignError where it cannot be."""
    questions = load_campaign(path).questions
    found: dict[str, str] = {}
    for q in questions:
        if q.target == "study" and "NAME" in q.variables:
            found.setdefault(q.variables["NAME"], q.make_line())
    return found


def study_command(name: str, path: Path = CAMPAIGN_FILE) -> str:
    """The command that measures a study: its campaign question's (with the question's
    BUDGET), else the race at the default budget."""
    return asked(path).get(name, f"make study NAME={name} TRIALS=auto BUDGET={AUTO_BUDGET_MIN}")


def documents() -> dict[str, list[Study]]:
    """Seed document file -> the studies whose source names it (readable ones), by name."""
    found: dict[str, list[Study]] = {}
    for name in study_names():
        try:
            study = load_study(name)
        except StudyError:
            continue
        if SEED.fullmatch(study.source):
            found.setdefault(study.source, []).append(study)
    return dict(sorted(found.items()))


def judged(study: Study, records: list[Record]) -> tuple[list[Record], list[Outcome]]:
    """The records a study's section shows and its outcomes, as the section judges them."""
    ran = latest_run(records, study.name, tuple(a.id for a in study.arms))
    if not ran:
        return [], []
    if study.judged:
        shown, _ = collapse_groups(study, ran)
        return shown, outcomes(study, shown)
    pairs = network.fix_pairs(ran) if study.name == "lb-keepalive-race" else {}
    return ran, [network.fix_outcome(fix) for _, fix in sorted(pairs.items())]


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _row(o: Outcome) -> list[str]:
    """A check's row: the claim, ours with the interval it rests on, the verdict."""
    if not o.check:  # the keep-alive race's line: "- <server>, …: <figures> — <verdict>"
        claim, _, rest = o.line.removeprefix("- ").partition(": ")
        ours, _, said = rest.partition(" — ")
        word = (
            o.result
            if o.result != "inconclusive"
            else f"undecided: {said.removeprefix('inconclusive: ')}"
        )
        return [_cell(f"the fix lowers {claim}"), _cell(ours), _cell(word)]
    claim = o.check.get("describe", o.check["metric"])
    if o.result == "inconclusive":
        return [_cell(claim), _cell(o.head or "–"), _cell(f"undecided: {o.why}")]
    return [_cell(claim), _cell(f"{o.head}; {o.why}"), o.result]


def study_lines(study: Study, records: list[Record]) -> list[str]:
    """One study's part of its document's block."""
    shown, found = judged(study, records)
    head = f"**{study.name}** — {study.title}"
    command = f"`{study_command(study.name)}`"
    if not shown:
        return [f"{head}: not measured here; run {command}.", ""]
    hosts = ", ".join(sorted({host_of(r) for r in shown}))
    if not found:
        why = "described, not judged" if not study.judged else "no check could be judged"
        return [f"{head} (on {hosts}): {why}; see the study's section.", ""]
    word = verdict_of(found)
    lines = [f"{head} (on {hosts}): **{WORDS.get(word, word)}** ({tally(found)}).", ""]
    lines += [*markdown_table(HEADER, [_row(o) for o in found], "lll"), ""]
    if word != "reproduced":
        lines += [f"How ours differs: {_cell(study.differs)}", ""]
    return lines


def document_verdict(found: Sequence[Outcome]) -> str:
    """A document's verdict over every check of its studies (the studies' own words)."""
    if not found:
        return "not measured here"
    word = verdict_of(found)
    return WORDS.get(word, word)


def source_lines(records: list[Record]) -> list[str]:
    """The section: the substitutions once, then per seed document its verdict and, per
    study naming it, the claims beside ours."""
    lines = [HEADING, "", SUBSTITUTIONS, ""]
    for source, studies in documents().items():
        found = [o for study in studies for o in judged(study, records)[1]]
        number = source[:3]
        names = ", ".join(s.name for s in studies)
        verdict = document_verdict(found)
        lines += [f"### {number} (`{source}`): {verdict}", ""]
        lines += [f"Studies naming it: {names}.", ""]
        for study in studies:
            lines += study_lines(study, records)
    return lines


# Studies that answer an issue's open question rather than a seed document (no published
# figure to reproduce): their checks say where the answer changes.
QUESTIONS_HEADING = "## Open questions no source document asks"
QUESTIONS = {
    "free-threading": "Does free-threaded Python change which configuration to run?",
    "protocols": "What do HTTP/2, TLS and idle WebSockets cost each ASGI server?",
}
# The open questions whose answer is a recommendation (said under the Recommendations too).
ADVICE = {"free-threading": "Free-threaded Python (PYTHON=3.14t against 3.14 with the GIL)"}


def answer_line(found: Sequence[Outcome]) -> str:
    """Where the study's decided checks hold (the answer changes as its claim says), where
    they do not, and how many are undecided: each check's own describe, the study's own
    judgement."""
    held = [o.check.get("describe", "") for o in found if o.result == "reproduced"]
    failed = [o.check.get("describe", "") for o in found if o.result == "not reproduced"]
    open_ = sum(1 for o in found if o.result not in ("reproduced", "not reproduced"))
    parts = []
    if held:
        parts.append("decided as claimed: " + "; ".join(held))
    if failed:
        parts.append("decided against the claim: " + "; ".join(failed))
    if open_:
        parts.append(f"{open_} check(s) undecided (the table says why)")
    return _cell(". ".join(parts)) + "." if parts else "no check could be judged."


def question_lines(records: list[Record]) -> list[str]:
    """Per open question its study: the answer in a line (answer_line), then the claims
    beside ours as in Source documents (study_lines); "not measured here" with the command."""
    lines = [QUESTIONS_HEADING, ""]
    for name, asked in QUESTIONS.items():
        try:
            study = load_study(name)
        except StudyError:
            continue
        found = judged(study, records)[1]
        lines += [f"### {asked}", ""]
        if found:
            lines += [f"Answer on this evidence: {answer_line(found)}", ""]
        lines += study_lines(study, records)
    return lines


def limit_checks(records: list[Record]) -> dict[tuple, list]:
    """The verdicts of every study that compared worker rules under a container's limits, on
    each such pair (bench.studies.container.checks_of), judged as its section judges them:
    Production behaviours and the recommendations show these, never a judgement of their
    own (bench.report.limits)."""
    names = {
        str(r.metadata.get("study"))
        for r in records
        if r.container and r.metadata.get("workers_rule") is not None
    }
    found: dict[tuple, list] = {}
    for name in sorted(names & set(study_names())):
        try:
            study = load_study(name)
        except StudyError:
            continue
        shown, judged_checks = judged(study, records)
        for key, checks in checks_of(judged_checks, shown).items():
            found.setdefault(key, []).extend(checks)
    return found


def advice_lines(records: list[Record]) -> list[str]:
    """Under the Recommendations: per open question that is a recommendation, where its
    study says the answer changes (answer_line, the study's own judgement) with the machines
    it ran on, or that it is not measured here with the command."""
    lines = []
    for name, what in ADVICE.items():
        try:
            study = load_study(name)
        except StudyError:
            continue
        shown, found = judged(study, records)
        if not shown:
            lines.append(f"**{what}**: not measured here — run `{study_command(name)}`.")
            continue
        hosts = ", ".join(sorted({host_of(r) for r in shown}))
        answer = answer_line(found) if found else "no check could be judged."
        lines.append(
            f"**{what}** (study {name} on {hosts}; the claims beside ours under Open "
            f"questions): {answer}"
        )
    return [*lines, ""] if lines else []
