"""Recommendations and the summary as an answer (bench.report.recommend, bench.report.summary):
a recommendation only where the intervals decide, never a baseline, the first screen holds
the answer, tables of at most 9 columns, files world-readable."""

import re
import stat
from dataclasses import replace
from pathlib import Path

from bench.core.record import Record, load_records
from bench.report.recommend import NOT_ENOUGH, command_line, recommendations
from bench.report.summary import render_report, render_summary, write_summary

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
FIRST_SCREEN = 60
MAX_COLUMNS = 9


def _base() -> Record:
    """A real plaintext record of the fixtures: granian, direct, wrk."""
    records, _ = load_records(FIXTURES / "records")
    return next(r for r in records if r.server == "granian" and r.scenario == "plaintext")


def _trials(rec: Record, server: str, knobs: dict, rps: list[float]) -> list[Record]:
    return [
        replace(rec, server=server, knobs=knobs, rps=value, trial=i, run_id=f"{server}{i}" * 4)
        for i, value in enumerate(rps, start=1)
    ]


def _arena(leader_rps: list[float], other_rps: list[float]) -> list[Record]:
    base = replace(_base(), concurrency=50)
    return [
        *_trials(base, "granian", {"workers": 2, "threads": 4, "backlog": 1024}, leader_rps),
        *_trials(base, "gunicorn-sync", {"workers": 2, "backlog": 2048}, other_rps),
        # the ceiling, far ahead: a reference line, never recommended
        *_trials(base, "nginx-static", {"workers": 2, "backlog": 1024}, [90e3, 91e3, 92e3]),
    ]


def test_a_separated_leader_is_recommended_with_its_command_never_a_baseline() -> None:
    """granian significantly ahead of gunicorn-sync (nginx-static fastest of all): granian
    is recommended with its declared command line and knobs, gunicorn-sync is the one to
    avoid with both figures; nginx-static appears nowhere in the answer."""
    records = _arena([20_000.0, 20_100.0, 19_900.0], [6_000.0, 6_050.0, 5_950.0])
    recs, _ = recommendations(records)
    direct = next(r for r in recs if r.workload == "light CPU" and r.deployment == "direct")
    assert direct.server == "granian"
    assert direct.command == command_line("granian", direct.knobs)
    assert "--workers 2 --blocking-threads 4 --backlog 1024" in direct.command
    assert "rank 1 of 2 by req/s" in direct.evidence and "20,000" in direct.evidence
    assert direct.avoid.startswith("gunicorn-sync w2 b2048: 6,000 vs 20,000 req/s")
    assert all(r.server != "nginx-static" for r in recs)
    summary = render_summary(records, [])
    answer = summary.split("## Recommendations")[1].split("## At a glance")[0]
    rows = [line for line in answer.splitlines() if line.startswith("| ")]
    assert rows and not any("nginx-static" in row for row in rows)
    assert "**granian** w2 t4 b1024" in answer


def test_overlapping_leaders_get_not_enough_evidence_and_a_command() -> None:
    """Two configurations whose intervals overlap: no recommendation, the make command that
    would decide instead."""
    records = _arena([20_000.0, 12_000.0, 16_000.0], [15_000.0, 19_000.0, 14_000.0])
    recs, _ = recommendations(records)
    direct = next(r for r in recs if r.workload == "light CPU" and r.deployment == "direct")
    assert direct.server is None
    servers = direct.command.split("SERVER=")[1].split()[0]
    assert set(servers.split(",")) == {"granian", "gunicorn-sync"}  # best point estimate first
    assert (
        direct.command.startswith("make bench SERVER=") and "SCENARIO=plaintext" in direct.command
    )
    assert "TRIALS=5" in direct.command
    assert f"{NOT_ENOUGH} `{direct.command}`" in render_summary(records, [])


def test_the_first_screen_holds_recommendations_and_at_a_glance() -> None:
    """Over the fixture records: both sections start within the first 60 lines, every
    recommendation row among them."""
    records, problems = load_records(FIXTURES / "records")
    lines = render_summary(records, problems).splitlines()
    first = lines[:FIRST_SCREEN]
    assert "## Recommendations" in first and "## At a glance" in first
    rows = [
        line for line in lines if line.startswith("| light CPU") or line.startswith("| database")
    ]
    assert rows and all(row in first for row in rows)


def _columns(text: str) -> list[int]:
    """Columns of every markdown table in text (from its rule line)."""
    return [
        line.count("|") - 1 for line in text.splitlines() if re.fullmatch(r"\|(:?-+:?\|)+", line)
    ]


def test_no_table_of_the_summary_has_more_than_nine_columns() -> None:
    """summary.md and the speed detail files: at most 9 columns per table."""
    records, problems = load_records(FIXTURES / "records")
    files = render_report(records, problems)
    checked = [files["summary.md"], *(t for n, t in files.items() if "/speed-" in n)]
    columns = [c for text in checked for c in _columns(text)]
    assert columns and max(columns) <= MAX_COLUMNS


def test_written_files_are_world_readable(tmp_path: Path) -> None:
    """summary.md and every detail file: mode 0644, whatever mkstemp's 0600."""
    import shutil

    shutil.copytree(FIXTURES / "records" / "machine-a", tmp_path / "records")
    write_summary(tmp_path)
    written = [tmp_path / "summary.md", *(tmp_path / "details").iterdir()]
    assert len(written) > 3
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o644 for p in written)


def test_links_stay_inside_the_results() -> None:
    """No link of summary.md or a detail file climbs out of the results directory."""
    records, problems = load_records(FIXTURES / "records")
    for name, text in render_report(records, problems).items():
        depth = name.count("/")
        for target in re.findall(r"\]\(([^)]+)\)", text):
            assert target.count("../") <= depth, (name, target)
