"""bench/studies/sources.py: the summary's Source documents over the shipped reference's study
records: a block per seed document 000-004, the substitutions said once, each check's verdict
the study's own (never judged a second way), "not measured here" with the command where a
study has no records, "differs" where checks went both ways."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import pytest

from bench.core.campaign import load_campaign
from bench.core.defaults import AUTO_BUDGET_MIN
from bench.core.record import Record
from bench.report.summary import SOURCES_TOPIC, render_report
from bench.studies import sources
from bench.studies.verdict import Outcome

ROOT = Path(__file__).resolve().parents[2]
RECORDS = ROOT / "tests" / "fixtures" / "reference-2026-11" / "records"


@cache
def study_records() -> tuple[Record, ...]:
    """The shipped reference's study records (the others are not read: faster)."""
    found = []
    for path in sorted(RECORDS.glob("*.json")):
        data = json.loads(path.read_text())
        if data.get("metadata", {}).get("study"):
            found.append(Record.from_dict(data))
    return tuple(found)


def _block(lines: list[str], number: str) -> str:
    text = "\n".join(lines)
    start = text.index(f"### {number} ")
    end = text.find("\n### ", start + 1)
    return text[start : end if end != -1 else None]


def test_every_seed_document_has_its_block_and_the_substitutions_are_said_once() -> None:
    lines = sources.source_lines(list(study_records()))
    text = "\n".join(lines)
    assert lines[0] == sources.HEADING
    for number in ("000", "001", "002", "003", "004"):
        assert f"### {number} (`{number}_" in text
    assert text.count("PostgreSQL behind pgbouncer stands for") == 1


def test_each_row_carries_the_study_verdict_for_that_check() -> None:
    """The rows of sync-vs-async-p99 (source 003) are its outcomes, word for word: the
    claim, our figures with the interval or the reason, reproduced / not reproduced /
    undecided."""
    records = list(study_records())
    study = next(s for s in sources.documents()["003_f951c8b45aa32e56.txt"])
    _, found = sources.judged(study, records)
    assert found, "the reference holds sync-vs-async-p99 records"
    block = _block(sources.source_lines(records), "003")
    for o in found:
        row = sources._row(o)
        assert "| " + " | ".join(row) + " |" in block
        expected = o.result if o.result != "inconclusive" else f"undecided: {sources._cell(o.why)}"
        assert row[2] == expected


def test_a_document_without_records_says_not_measured_here_with_the_command() -> None:
    records = [r for r in study_records() if r.metadata.get("study") != "sync-vs-gevent"]
    block = _block(sources.source_lines(records), "000")
    assert "### 000 (`000_a12100bfbd571bdb.txt`): not measured here" in block
    assert f"run `{_question_line('sync-vs-gevent')}`" in block


def _question_line(name: str) -> str:
    """The make line of the reference.toml question that asks study `name`."""
    return next(q.make_line() for q in load_campaign().questions if q.variables.get("NAME") == name)


def test_the_command_takes_its_budget_from_the_question_that_asks_the_study(
    tmp_path: Path,
) -> None:
    """Issue 32: "BUDGET=30" was typed for every study. The command is the question's own
    make line (its BUDGET, from reference.toml through bench.core.campaign), and for a study
    no question asks, the race at the default budget (AUTO_BUDGET_MIN)."""
    line = _question_line("sync-vs-gevent")
    budget = next(
        q.variables["BUDGET"]
        for q in load_campaign().questions
        if q.variables.get("NAME") == "sync-vs-gevent"
    )
    assert sources.study_command("sync-vs-gevent") == line
    assert line.endswith(f"BUDGET={budget}") and "NAME=sync-vs-gevent" in line
    empty = tmp_path / "reference.toml"
    empty.write_text('results = "results/x"\n')  # no question: CampaignError, no command
    assert sources.study_command("sync-vs-gevent", empty) == (
        f"make study NAME=sync-vs-gevent TRIALS=auto BUDGET={AUTO_BUDGET_MIN}"
    )


def _outcome(result: str, held: str) -> Outcome:
    return Outcome({"metric": "rps", "describe": "x"}, result, "- x", held, why="w", head="h")


@pytest.mark.parametrize(
    ("results", "word"),
    [
        ([("reproduced", "holds"), ("not reproduced", "does not hold")], "differs"),
        ([("reproduced", "holds"), ("inconclusive", "inconclusive")], "undecided"),
        ([("reproduced", "holds")], "reproduced"),
        ([("not reproduced", "outside")], "not reproduced"),
        ([("inconclusive", "one trial")], "undecided (one trial: cannot decide)"),
        ([], "not measured here"),
    ],
)
def test_a_documents_verdict_is_its_checks_verdict_in_the_documents_words(
    results: list[tuple[str, str]], word: str
) -> None:
    assert sources.document_verdict([_outcome(r, h) for r, h in results]) == word


def test_the_section_goes_into_summary_md_not_a_detail_file() -> None:
    """render_report puts the source documents after At a glance in summary.md, and
    makes no detail file of them."""
    texts = render_report([], [], topics={SOURCES_TOPIC: ["## Source documents", "", "body"]})
    assert "## Source documents\n\nbody" in texts["summary.md"]
    assert not any("sources" in name for name in texts)


def test_the_keep_alive_race_rows_are_its_fix_decisions() -> None:
    """lb-keepalive-race (source 002) has no checks: its rows are the fix decisions the
    study section and the recommendations read (reproduced, or undecided with the reason)."""
    records = list(study_records())
    race = [s for s in sources.documents()["002_c588a22269204d77.txt"] if not s.checks]
    study = next(s for s in race if s.name == "lb-keepalive-race")
    _, found = sources.judged(study, records)
    assert found, "the reference holds the race's default and fix arms"
    block = _block(sources.source_lines(records), "002")
    for o in found:
        claim, ours, word = sources._row(o)
        assert claim.startswith("the fix lowers ") and "502 per 10,000" in claim
        assert " — " not in ours
        assert word == o.result or (word.startswith("undecided: ") and o.result == "inconclusive")
        assert f"| {claim} | {ours} | {word} |" in block


def test_an_open_question_says_where_the_answer_changes_from_its_checks() -> None:
    """The free-threading study's answer line: decided checks that hold, those that do not,
    the undecided counted — each check's own words, the study's own judgement; a study
    without records says not measured here with its command."""
    found = [
        Outcome({"metric": "rps", "describe": "threads replace processes"}, "reproduced", "", ""),
        Outcome({"metric": "rps", "describe": "the GIL costs /db"}, "not reproduced", "", ""),
        Outcome({"metric": "rps", "describe": "memory"}, "inconclusive", "", ""),
    ]
    line = sources.answer_line(found)
    assert line == (
        "decided as claimed: threads replace processes. decided against the claim: the GIL "
        "costs /db. 1 check(s) undecided (the table says why)."
    )
    text = "\n".join(sources.question_lines([]))
    assert text.startswith(sources.QUESTIONS_HEADING)
    assert "### Does free-threaded Python change which configuration to run?" in text
    assert f"run `{_question_line('free-threading')}`" in text
    assert "Answer on this evidence" not in text


def test_the_recommendations_carry_the_free_threading_answer_or_its_command() -> None:
    """Under the Recommendations (ADVICE_TOPIC): with no free-threading records, the command
    that measures it; with them, the study's own answer line and its machine."""
    assert sources.advice_lines([]) == [
        "**Free-threaded Python (PYTHON=3.14t against 3.14 with the GIL)**: not measured here "
        f"— run `{_question_line('free-threading')}`.",
        "",
    ]
    text = "\n".join(
        render_report([], [], topics={"advice": sources.advice_lines([])})[
            "summary.md"
        ].splitlines()
    )
    assert "**Free-threaded Python (PYTHON=3.14t against 3.14 with the GIL)**: not measured" in text
