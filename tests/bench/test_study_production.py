"""The production studies' sections over captured records: a study whose arms are all open
loop (reload) gets one verdict, not an empty closed-loop one."""

import dataclasses
import json
from pathlib import Path

from bench.core.record import NEVER_RECYCLED, Record, load_records
from bench.report import figures
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
        "requests failed on reload, Granian at most Gunicorn sync's (+0.1 % of the arrivals): "
        "0 vs 0 — inconclusive: one trial" in text
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
    against 12-16 decide "at most"; 40 against 42 in all does not (neither separated nor
    within the check's 0.1 % of the arrivals); and a count with more events on a's side is
    "not at most"."""
    study = schema.load_study("reload")
    check = study.checks[0]  # requests failed on reload, Granian at most Gunicorn sync's
    clear = [*_trials("granian", [0, 0, 0]), *_trials("gunicorn-sync", [12, 16, 14])]
    judged = outcome(check, clear, family=2)
    assert judged.result == "reproduced" and "(0 in 9,000 vs 42 in 9,000, exact" in judged.line
    spread = [*_trials("granian", [0, 0, 40]), *_trials("gunicorn-sync", [12, 16, 14])]
    judged = outcome(check, spread, family=2)
    assert judged.result == "inconclusive"
    assert "neither separated nor within the margin" in judged.line
    worse = [*_trials("granian", [30, 35, 40]), *_trials("gunicorn-sync", [0, 1, 0])]
    assert outcome(check, worse, family=2).result == "not reproduced"


REFERENCE = Path(__file__).resolve().parents[1] / "fixtures" / "reference-2026-11"


def _recycle_study() -> list[Record]:
    """The previous reference's recycle study run (captured): meinheld's recycling arm
    started 0 workers (its worker ignores max_requests)."""
    records, _ = load_records(REFERENCE)
    return [r for r in records if r.metadata.get("study") == "recycle"]


def test_a_recycling_arm_that_recycled_nothing_is_not_tabled_as_measured() -> None:
    """Issue 32 item 8: meinheld's "workers recycled" row read like a measurement (p99 8.5 ms,
    0 failed, 0 workers started). Its label says "not measured: no worker was recycled" and
    its figures are not shown; the arms that recycled keep theirs."""
    records = _recycle_study()
    rows = {
        line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
        for line in sections.study_section(schema.load_study("recycle"), records, None)
        if line.startswith("| ") and "recycl" in line
    }
    meinheld = next(cells for label, cells in rows.items() if label.startswith("meinheld, workers"))
    label = next(label for label in rows if label.startswith("meinheld, workers"))
    assert NEVER_RECYCLED in label
    p99, failed, started = meinheld[-3:]
    assert (p99, failed, started) == ("–", "–", "0")
    sync = next(
        cells for label, cells in rows.items() if label.startswith("gunicorn-sync, workers")
    )
    assert sync[-3] != "–" and int(sync[-1]) > 0


def test_recycling_has_one_figure_the_studys_own(tmp_path: Path) -> None:
    """Issue 32 (one plot per question): recycle.png, of the latest round alone, and
    study-recycle.png, each arm's geometric mean over its rounds, gave two figures for one arm
    (gunicorn-sync's p99 recycling 52.1 ms and 9.66 ms). The production figures draw no
    recycling figure of their own and point to the study's, in which meinheld's recycling arm
    (0 workers started) has no value."""
    records = _recycle_study()
    text = "\n".join(figures.figure_sections(records, tmp_path))
    assert not (tmp_path / "plots" / "recycle.png").exists()
    assert "(plots/study-recycle.png)" in text
    panels = sections.study_series(schema.load_study("recycle"), records)
    p99 = next(p for p in panels if p.metric.startswith("p99"))
    values = {label: points[0][1] for label, points in p99.series.items()}
    assert next(v for k, v in values.items() if k.startswith("meinheld, workers")) is None
    assert next(v for k, v in values.items() if k.startswith("gunicorn-sync, workers")) > 0
