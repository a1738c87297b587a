"""The production studies' sections over captured records: a study whose arms are all open
loop (reload) gets one verdict, not an empty closed-loop one."""

import dataclasses
import json
from pathlib import Path

from bench.core.record import Record
from bench.studies import schema, sections
from bench.studies.verdict import outcome

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
        "requests failed on reload, Granian at most Gunicorn sync's: 0 vs 0 — "
        "inconclusive: one trial" in text
    )


def _trials(server: str, failed: list[int]) -> list[Record]:
    """The captured reload as trials with these failed counts."""
    rec = _as_arm(server)
    return [
        dataclasses.replace(
            rec,
            trial=i + 1,
            run_id=f"{rec.run_id}-{i}",
            lifecycle={**(rec.lifecycle or {}), "failed": n},
        )
        for i, n in enumerate(failed)
    ]


def test_counts_with_zeros_are_decided_on_their_own_scale() -> None:
    """Failed requests on reload are counts, often 0 (no log, no ratio): decided by the exact
    test on the events out of the arrivals (the keep-alive race's test): three trials of 0
    against 12-16 decide "at most"; 40 against 42 in all does not; and a count with more
    events on a's side is "not at most"."""
    study = schema.load_study("reload")
    check = study.checks[0]  # requests failed on reload, Granian at most Gunicorn sync's
    clear = [*_trials("granian", [0, 0, 0]), *_trials("gunicorn-sync", [12, 16, 14])]
    judged = outcome(check, clear, family=2)
    assert judged.result == "reproduced" and "(0 in 9,000 vs 42 in 9,000, exact" in judged.line
    spread = [*_trials("granian", [0, 0, 40]), *_trials("gunicorn-sync", [12, 16, 14])]
    judged = outcome(check, spread, family=2)
    assert judged.result == "inconclusive" and "not separated yet" in judged.line
    worse = [*_trials("granian", [30, 35, 40]), *_trials("gunicorn-sync", [0, 1, 0])]
    assert outcome(check, worse, family=2).result == "not reproduced"
