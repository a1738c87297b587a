"""The reference campaign's declaration: reference.toml -> Campaign (its questions, checked).

Input: reference.toml at the checkout's root (one file: every question `make reference` asks,
each a make bench, study, tune or capacity command in make-variable style). Output: a frozen
Campaign, or CampaignError in one line naming what is wrong. Each question's variables are
parsed by their one declaration (bench/core/variables.py), as make would parse them, so a
campaign that cannot run is refused before set-up (bench/precheck.py). Standard library only.
"""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from bench.core import studyfile, variables
from bench.core.validate import UsageError

ROOT = Path(__file__).resolve().parents[2]
CAMPAIGN_FILE = ROOT / "reference.toml"
# make target -> the `python -m bench` command it runs
COMMANDS = {"bench": "run", "study": "study", "tune": "tune", "capacity": "capacity"}
QUESTION_ID = re.compile(r"[a-z0-9][a-z0-9-]{0,63}")
# SERVER = "@leaders": the servers leading another question's records, chosen when it runs
LEADERS = "@leaders"
# What SERVER=@leaders is checked as before they are known: two servers of the catalog that
# every target takes (make capacity TRIALS=auto races two or more; make tune searches both).
STAND_IN = "gunicorn-sync,granian"
# The campaign sets these itself (RESULTS: the file's; MACHINE: the user's label, the same
# for every question).
OWN = ("RESULTS", "MACHINE")
# RESULTS/campaign.jsonl: one JSON line per question asked (bench/cli/campaign.py appends it)
LEDGER = "campaign.jsonl"


class CampaignError(UsageError):
    """reference.toml cannot be run as written (exit 2, one line)."""


@dataclass(frozen=True)
class Leaders:
    """The servers of SERVER=@leaders: the `top` leading by req/s in question `question`'s
    records at one scenario and concurrency (bench.cli.campaign resolves them)."""

    question: str
    scenario: str
    concurrency: int
    top: int


@dataclass(frozen=True)
class Question:
    """One question: a make target and its variables (raw text, as on make's line)."""

    id: str
    target: str  # bench, study, tune, capacity
    why: str
    variables: dict[str, str]
    leaders: Leaders | None = None

    @property
    def command(self) -> str:
        """The `python -m bench` command."""
        return COMMANDS[self.target]

    def make_line(self, servers: str | None = None) -> str:
        """The question as a user would type it: `make bench SERVER=all TRIALS=auto …`."""
        shown = dict(self.variables)
        if servers is not None and "SERVER" in shown:
            shown["SERVER"] = servers
        parts = [f"{k}={v}" if " " not in v else f"{k}='{v}'" for k, v in shown.items()]
        return " ".join(["make", self.target, *parts])

    def fingerprint(self) -> str:
        """What makes two askings the same question: its target and variables."""
        text = json.dumps([self.target, self.variables], sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def definition(self) -> str | None:
        """What a study question's answer rests on besides its command: its study file's text
        (an arm or a check added or changed asks it again, as a changed command does; the
        accept-queue-abort arms added after it was answered once needed BUDGET bumped to be
        asked). None for the other targets."""
        if self.target != "study":
            return None
        digest = hashlib.sha256()
        for name in sorted(n.strip() for n in self.variables.get("NAME", "").split(",")):
            path = studyfile.study_path(name)
            digest.update(name.encode() + b"\0")
            digest.update(path.read_bytes() if path.is_file() else b"")
        return digest.hexdigest()[:16]


@dataclass(frozen=True)
class Campaign:
    """The campaign: where it writes and its questions, in the order they are asked."""

    results: Path
    questions: tuple[Question, ...]


def _leaders(qid: str, raw: object, earlier: list[str]) -> Leaders:
    """A question's [question.leaders] table, naming an earlier question."""
    if not isinstance(raw, dict) or set(raw) != {"question", "scenario", "concurrency", "top"}:
        raise CampaignError(
            f"question {qid}: SERVER={LEADERS} needs leaders = {{ question, scenario, "
            "concurrency, top }"
        )
    if raw["question"] not in earlier:
        raise CampaignError(
            f"question {qid}: leaders.question {raw['question']!r} is not an earlier question; "
            f"valid: {', '.join(earlier) or 'none'}"
        )
    top, conc = raw["top"], raw["concurrency"]
    if not (isinstance(top, int) and 1 <= top <= 20 and isinstance(conc, int) and conc >= 1):
        raise CampaignError(f"question {qid}: leaders.top is 1..20, concurrency a whole number")
    return Leaders(str(raw["question"]), str(raw["scenario"]), conc, top)


def check_variables(qid: str, target: str, given: dict[str, str], results: Path) -> None:
    """Each variable is one make `target` takes, parsed by its declaration with the rules
    between them (SERVER=@leaders stands for a server of the catalog here)."""
    command = COMMANDS[target]
    taken = {v.name for v in variables.for_command(command)}
    for name in given:
        if name in OWN:
            raise CampaignError(f"question {qid}: {name} is the campaign's own; remove it")
        if name not in taken:
            close = variables.unknown_variable(name)
            why = close if close else f"make {target} does not take it"
            raise CampaignError(f"question {qid}: {name}: {why}")
    parsed = dict(given, RESULTS=str(results))
    if parsed.get("SERVER") == LEADERS:
        parsed["SERVER"] = STAND_IN  # the leaders are servers of the catalog
    try:
        variables.check(command, parsed)
    except UsageError as exc:
        raise CampaignError(f"question {qid}: {exc}") from None


def _question(raw: object, earlier: list[str], results: Path) -> Question:
    """One [[question]] table, checked."""
    if not isinstance(raw, dict):
        raise CampaignError("each [[question]] is a table")
    qid = str(raw.get("id", ""))
    if not QUESTION_ID.fullmatch(qid) or qid in earlier:
        raise CampaignError(
            f"question id {qid!r}: unique, lower-case letters, digits and '-' (valid: a new id)"
        )
    target = raw.get("target")
    if target not in COMMANDS:
        raise CampaignError(f"question {qid}: target {target!r}; valid: {', '.join(COMMANDS)}")
    given = raw.get("variables", {})
    if not isinstance(given, dict) or not all(isinstance(v, str) for v in given.values()):
        raise CampaignError(f"question {qid}: variables is a table of text values")
    if given.get("TRIALS") != "auto" and target != "tune":
        raise CampaignError(f"question {qid}: TRIALS=auto (the race engine answers every question)")
    if "BUDGET" not in given:
        raise CampaignError(f"question {qid}: BUDGET= (minutes) is required: the race's bound")
    extra = set(raw) - {"id", "target", "why", "variables", "leaders"}
    if extra or not raw.get("why"):
        raise CampaignError(f"question {qid}: keys id, target, why, variables (leaders)")
    leaders = None
    if given.get("SERVER") == LEADERS:
        leaders = _leaders(qid, raw.get("leaders"), earlier)
    check_variables(qid, str(target), dict(given), results)
    return Question(qid, str(target), str(raw["why"]), dict(given), leaders)


def load_campaign(path: Path = CAMPAIGN_FILE) -> Campaign:
    """The campaign file, every question checked; CampaignError on the first problem."""
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise CampaignError(f"{path.name}: {exc}") from None
    results = data.get("results")
    if not isinstance(results, str) or not results:
        raise CampaignError(f'{path.name}: results = "<directory>" is required')
    where = Path(results) if Path(results).is_absolute() else path.parent / results
    questions: list[Question] = []
    for raw in data.get("question", []):
        questions.append(_question(raw, [q.id for q in questions], where))
    if not questions:
        raise CampaignError(f"{path.name}: no [[question]]")
    return Campaign(where, tuple(questions))


def read_ledger(results: Path) -> list[dict]:
    """Every line of the ledger (unreadable lines are skipped: a question is then re-asked),
    each as read today (read_as)."""
    try:
        text = (results / LEDGER).read_text()
    except OSError:
        return []
    entries = []
    for line in text.splitlines():
        try:
            entries.append(read_as(results, json.loads(line)))
        except json.JSONDecodeError:
            continue
    return entries


def read_as(results: Path, entry: dict) -> dict:
    """A ledger line as read today. Until 2026-11-28 make study exited 1 when a run failed
    even where the study measures the failure (container-limits' default worker rule
    brought down by OOM kills under a memory limit; studyfile.failures_are_findings): such
    a line, whose failed records are all of those arms, is read as the answer make study now
    exits 0 for (`written` keeps what was written); any other line as it is."""
    command = str(entry.get("command", ""))
    if entry.get("exit") != 1 or not command.startswith("make study "):
        return entry
    words = dict(w.split("=", 1) for w in command.split()[2:] if "=" in w)
    checks: list[dict] = []
    failed: list[str] = []
    try:
        for name in words.get("NAME", "").split(","):
            checks += studyfile.read_study(studyfile.study_path(name)).get("check", [])
        for name in entry.get("records", []):
            data = json.loads((results / "records" / name).read_text())
            if data.get("status") == "failed":
                failed.append(str((data.get("metadata") or {}).get("study_arm")))
    except (OSError, ValueError, studyfile.StudyError):
        return entry
    if not studyfile.failures_are_findings(checks, failed):
        return entry
    written = {"status": entry.get("status"), "exit": 1}
    return {**entry, "status": "answered", "exit": 0, "written": written}


def machine_text(identity: object) -> str:
    """A ledger line's machine identity as a reader tells machines apart: the hashed id's
    first 8 characters, the CPU model and count (`a5adb7fd (AMD EPYC, 2 CPUs)`)."""
    if not isinstance(identity, dict):
        return "?"
    mid = str(identity.get("machine_id") or "?")[:8]
    return f"{mid} ({identity.get('cpu_model', '?')}, {identity.get('cpu_count', '?')} CPUs)"
