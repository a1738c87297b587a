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

from bench.core.campaign import CAMPAIGN_FILE, CampaignError, load_campaign, read_ledger


def _machine(identity: object) -> str:
    """A ledger line's machine as a reader tells machines apart."""
    if not isinstance(identity, dict):
        return "?"
    mid = str(identity.get("machine_id") or "?")[:8]
    return f"{mid} ({identity.get('cpu_model', '?')}, {identity.get('cpu_count', '?')} CPUs)"


def summary_lines(results: Path, campaign_file: Path = CAMPAIGN_FILE) -> list[str]:
    """Each question of the campaign: its latest ledger line here (status, machine, when, the
    records it wrote that are still present), or "not asked yet" and the make command."""
    ledger = read_ledger(results)
    if not ledger:
        return []
    try:
        questions = load_campaign(campaign_file).questions
    except CampaignError as exc:
        return ["## Reference campaign", "", f"The campaign file cannot be read: {exc}", ""]
    present = {p.name for p in (results / "records").glob("*.json")}
    rows, waiting = [], []
    machines = set()
    for q in questions:
        mine = [e for e in ledger if e.get("question") == q.id]
        if not mine:
            waiting.append(f"`{q.make_line()}`")
            rows.append(f"| {q.id} | not asked yet | – | – | – |")
            continue
        last = mine[-1]
        machines.add(_machine(last.get("identity")))
        named = last.get("records", [])
        kept = sum(1 for name in named if name in present)
        same = last.get("fingerprint") == q.fingerprint()
        changed = "" if same else " (its command has changed since)"
        rows.append(
            f"| {q.id} | {last.get('status', '?')}{changed} | {_machine(last.get('identity'))} | "
            f"{last.get('ended_at', '?')} | {kept:,} of {len(named):,} |"
        )
    asked = len(questions) - len(waiting)
    lines = [
        "## Reference campaign",
        "",
        f"`make reference` asks reference.toml's {len(questions)} questions, each within one "
        f"session; {asked} of them are asked in this directory, on "
        f"{len(machines)} machine(s) ({'; '.join(sorted(machines)) or '–'}). A question "
        "not asked yet has no figures here: nothing in this summary answers it.",
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
