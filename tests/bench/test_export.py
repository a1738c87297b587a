"""make export: one row per point with the estimates of bench.report.groups, CSV and JSON,
its columns documented in docs/export.md, bad FORMAT refused in one line (exit 2)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from bench.cli import main
from bench.core.record import load_records
from bench.report.export import COLUMNS, export, points
from bench.report.groups import groups, rps_estimate

ROOT = Path(__file__).resolve().parents[2]
RECORDS = ROOT / "tests" / "fixtures" / "records"


def test_one_row_per_point_with_the_groups_estimates() -> None:
    """Each point is one group of trials; its rps and interval are the groups' estimate."""
    records, _ = load_records(RECORDS)
    rows = points(records)
    assert len(rows) == len(groups(records)) > 0
    for group in groups(records).values():
        first = group[0]
        est = rps_estimate(group)
        match = [
            r
            for r in rows
            if r["server"] == first.server
            and r["concurrency"] == first.concurrency
            and r["scenario"] == first.scenario
            and r["trials"] == len(group)
            and r["rps"] == round(est.center, 3)
        ]
        assert match, (first.server, first.concurrency)
        assert match[0]["rps_trials"] == [round(float(x.rps), 3) for x in group]


def test_csv_has_the_documented_columns_and_a_row_per_point() -> None:
    records, _ = load_records(RECORDS)
    parsed = list(csv.DictReader(io.StringIO(export(records, "csv"))))
    assert list(parsed[0]) == list(COLUMNS)
    assert len(parsed) == len(points(records))


def test_json_round_trips() -> None:
    records, _ = load_records(RECORDS)
    doc = json.loads(export(records, "json"))
    assert doc["columns"] == COLUMNS
    assert doc["points"] == json.loads(json.dumps(points(records)))


def test_every_column_is_documented_in_docs_export_md() -> None:
    """docs/export.md lists each column with the description in COLUMNS (no drift)."""
    text = (ROOT / "docs" / "export.md").read_text()
    for name, what in COLUMNS.items():
        assert f"| `{name}` | {what} |" in text


@pytest.mark.parametrize("argv", [["--format=xml"], []])
def test_bad_format_is_one_line_and_exit_2(argv: list[str], capsys: pytest.CaptureFixture) -> None:
    assert main(["export", *argv, f"--results={RECORDS}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "valid: csv, json" in err[0]


def test_export_writes_csv_to_stdout(capsys: pytest.CaptureFixture) -> None:
    assert main(["export", "--format=csv", f"--results={RECORDS}"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == ",".join(COLUMNS)


def test_missing_results_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["export", "--format=json", f"--results={tmp_path / 'nope'}"]) == 2
    assert "not a directory" in capsys.readouterr().err
