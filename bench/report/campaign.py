"""The summary's "Reference campaign" lines: which of reference.toml's questions the records of
RESULTS answer, on which machine, and which are not asked yet (with their command).

Input: RESULTS/campaign.jsonl (the ledger `make reference` appends to, one JSON line per
question asked) and the campaign file (reference.toml, bench/core/campaign.py). Output:
summary lines, empty when RESULTS holds no ledger (a user's own runs). A campaign is answered
over several sessions (one question within one session), so a reference read before it ends
says what it does not hold yet instead of leaving it to the reader to notice a missing study.
"""

from __future__ import annotations

from pathlib import Path

from bench.core.campaign import (
    CAMPAIGN_FILE,
    CampaignError,
    load_campaign,
    machine_text,
    read_ledger,
)
from bench.core.record import PENDING_DIR


def _rows(
    results: Path, campaign_file: Path, ledger: list[dict]
) -> tuple[list, list[str], list[str], set[str]] | str:
    """Each question with its latest ledger line here (or None), the table's rows, the
    commands of those not asked yet, the machines; or why the campaign cannot be read."""
    try:
        questions = load_campaign(campaign_file).questions
    except CampaignError as exc:
        return f"The campaign file cannot be read: {exc}"
    present = {p.name for p in (results / "records").glob("*.json")}
    asked, rows, waiting, machines = [], [], [], set()
    for q in questions:
        mine = [e for e in ledger if e.get("question") == q.id]
        if not mine:
            waiting.append(f"`{q.make_line()}`")
            rows.append(f"| {q.id} | not asked yet | – | – | – |")
            asked.append((q, None))
            continue
        last = mine[-1]
        asked.append((q, last))
        machines.add(machine_text(last.get("identity")))
        named = last.get("records", [])
        kept = sum(1 for name in named if name in present)
        same = last.get("fingerprint") == q.fingerprint()
        changed = "" if same else " (its command has changed since)"
        rows.append(
            f"| {q.id} | {last.get('status', '?')}{changed} | "
            f"{machine_text(last.get('identity'))} | "
            f"{last.get('ended_at', '?')} | {kept:,} of {len(named):,} |"
        )
    return asked, rows, waiting, machines


def report(
    results: Path, campaign_file: Path = CAMPAIGN_FILE, detail: str = "details/campaign.md"
) -> tuple[list[str], list[str]]:
    """The summary's lines and details/campaign.md's, from one reading of the ledger and the
    campaign file; both empty without a ledger (a user's own runs)."""
    ledger = read_ledger(results)
    if not ledger:
        return [], []
    found = _rows(results, campaign_file, ledger)
    if isinstance(found, str):
        return ["## Reference campaign", "", found, ""], [found, ""]
    summary = _summary(found, detail)
    return summary[:-1] + _elsewhere(results, campaign_file) + summary[-1:], _detail(found)


def _answered_count(ledger: list[dict], questions: list[str]) -> int:
    """How many of `questions` a ledger's latest line answers."""
    latest = {e.get("question"): e for e in ledger}
    return sum(1 for q in questions if latest.get(q, {}).get("status") == "answered")


def _elsewhere(results: Path, campaign_file: Path) -> list[str]:
    """Where this campaign stands beside the others: for a machine's pending campaign
    (RESULTS is results/reference/pending-machines/<machine>), that it is not the reference
    yet; for the reference, each pending campaign with its count and its summary."""
    try:
        ids = [q.id for q in load_campaign(campaign_file).questions]
    except CampaignError:
        return []
    if results.parent.name == PENDING_DIR:
        return [
            "",
            "This is a machine's reference campaign kept apart from results/reference (another "
            "machine's) until it has answered more questions than that one; then the next "
            "`make reference`, on any machine, puts it in that one's place.",
        ]
    lines = []
    pending = results / PENDING_DIR
    for folder in sorted(pending.iterdir()) if pending.is_dir() else []:
        ledger = read_ledger(folder)
        if not ledger:
            continue
        lines.append(
            f"- Also under way on machine {machine_text(ledger[-1].get('identity'))}: "
            f"{_answered_count(ledger, ids)} of {len(ids)} questions answered, kept apart "
            f"([its summary]({PENDING_DIR}/{folder.name}/summary.md)); none of its records "
            "is in this summary."
        )
    return ["", *lines] if lines else []


def summary_lines(
    results: Path, campaign_file: Path = CAMPAIGN_FILE, detail: str = "details/campaign.md"
) -> list[str]:
    """The summary's first lines on the campaign (report's first part)."""
    return report(results, campaign_file, detail)[0]


def detail_lines(results: Path, campaign_file: Path = CAMPAIGN_FILE) -> list[str]:
    """details/campaign.md's lines (report's second part)."""
    return report(results, campaign_file)[1]


def _summary(found: tuple, detail: str) -> list[str]:
    """How many questions these records answer, on which machine(s), which ones, and where
    the rest are listed (`detail`)."""
    asked, _, waiting, machines = found
    answered = [q.id for q, last in asked if last and last.get("status") == "answered"]
    other = [
        f"{q.id} ({last.get('status')})"
        for q, last in asked
        if last and last.get("status") != "answered"
    ]
    text = (
        f"**Reference campaign**: {len(answered)} of reference.toml's {len(asked)} questions "
        f"answered here ({', '.join(answered) or 'none'}), on {len(machines)} machine(s) "
        f"({'; '.join(sorted(machines))})"
    )
    if other:
        text += f"; asked but not answered: {', '.join(other)}"
    text += (
        f"; {len(waiting)} not asked yet: nothing in this summary answers them "
        f"([the questions and their commands]({detail}))."
    )
    return [text, ""]


def _detail(found: tuple) -> list[str]:
    """Each question's status, machine, end and records still present, then the commands of
    the questions not asked yet."""
    _, rows, waiting, _ = found
    lines = [
        "`make reference` asks reference.toml's questions in order, each within one session "
        "(its own harness run), and skips those answered on the same machine identity. A "
        "question not asked yet has no figures in this summary.",
        "",
        "| question | status | machine | ended | records present |",
        "|---|---|---|---|---:|",
        *rows,
        "",
    ]
    if waiting:
        lines += [
            f"Not asked yet ({len(waiting)}; `make reference` on the same machine asks them, "
            "skipping those answered):",
            "",
            *[f"- {w}" for w in waiting],
            "",
        ]
    return lines
