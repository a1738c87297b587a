"""The production studies' sections over captured records: a study whose arms are all open
loop (reload) gets one verdict, not an empty closed-loop one."""

import dataclasses
import json
from pathlib import Path

from bench.core.record import Record
from bench.studies import schema, sections

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "lifecycle"


def _as_arm(server: str) -> Record:
    rec = Record.from_dict(json.loads((FIXTURES / f"{server}-reload.record.json").read_text()))
    meta = {**rec.metadata, "study": "reload", "study_arm": server, "study_run": "r1"}
    return dataclasses.replace(rec, metadata=meta)


def test_all_open_loop_study_has_one_verdict() -> None:
    """The captured reloads of granian and gunicorn-sync as the reload study's arms: one
    open-loop verdict with both checks judged, no closed-loop part."""
    records = [_as_arm("granian"), _as_arm("gunicorn-sync")]
    lines = sections.study_section(schema.load_study("reload"), records, None)
    text = "\n".join(lines)
    verdict = next(line for line in lines if line.startswith("**Verdict:"))
    assert verdict.startswith("**Verdict: open loop (oha) at 300 req/s: ")
    assert "closed loop" not in text.lower()
    assert (
        "requests failed on reload, Granian at most Gunicorn sync's: 0.00 vs 0.00 — holds" in text
    )
