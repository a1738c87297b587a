"""make export: one row per point with the estimates of bench.report.groups, CSV and JSON,
its columns documented in docs/export.md, bad FORMAT refused in one line (exit 2)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from bench.cli import main
from bench.core.record import load_records
from bench.report.export import COLUMNS, export, points
from bench.report.groups import groups, rps_estimate

ROOT = Path(__file__).resolve().parents[2]
RECORDS = ROOT / "tests" / "fixtures" / "records"
# granian 3 trials closed loop with errors, gunicorn-sync 1 ok trial and 1 failed run,
# granian 2 open-loop trials at 2,000 req/s with arrivals never sent
EXPORT = ROOT / "tests" / "fixtures" / "export"


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


def _oracle() -> dict[tuple, dict[str, object]]:
    """The fixture's points computed here from the JSON files, not through bench.report:
    per (server, concurrency, offered rate) the ok trials' geometric mean (scipy.stats.gmean)
    and Student's t 95 % interval on the log values, and the error counts summed."""
    trials: dict[tuple, list[dict]] = {}
    for path in sorted(EXPORT.glob("*.json")):
        raw = json.loads(path.read_text())
        if raw["status"] == "ok":
            key = (raw["server"], raw["concurrency"], raw.get("offered_rps"))
            trials.setdefault(key, []).append(raw)
    out = {}
    for key, runs in trials.items():
        row: dict[str, object] = {"trials": len(runs)}
        rps = [r["achieved_rps"] if r.get("achieved_rps") is not None else r["rps"] for r in runs]
        for name, values in (("rps", rps), ("p99_ms", [r["latency_ms"]["p99"] for r in runs])):
            logs = np.log(values)
            row[name] = float(stats.gmean(values))
            row[f"{name}_low"] = row[f"{name}_high"] = None
            if len(values) > 1:
                low, high = stats.t.interval(
                    0.95, len(values) - 1, loc=logs.mean(), scale=stats.sem(logs)
                )
                row[f"{name}_low"], row[f"{name}_high"] = float(np.exp(low)), float(np.exp(high))
        classes = ("connect", "read", "write", "timeout", "other", "non_2xx")
        row["failed"] = sum(r["errors"].get(c, 0) for r in runs for c in classes)
        row["unserved"] = row["failed"] + sum(r["errors"].get("unsent", 0) for r in runs)
        out[key] = row
    return out


def test_the_estimates_and_failures_match_an_independent_computation() -> None:
    """Every point's rps and p99 with their interval ends, its trials, failed and unserved
    requests are the ones numpy/scipy give on the fixture's raw values (to export's 3
    decimals); a failed run is no trial and its errors are not counted."""
    records, _ = load_records(EXPORT)
    rows = {(r["server"], r["concurrency"], r["offered_rps"]): r for r in points(records)}
    expected = _oracle()
    assert set(rows) == set(expected) and len(expected) == 3
    for key, want in expected.items():
        got = rows[key]
        for column, value in want.items():
            if value is None or isinstance(value, int):
                assert got[column] == value, (key, column)
            else:
                assert got[column] == pytest.approx(value, abs=1e-3), (key, column)
    # the fixture's figures, so that a wrong oracle cannot agree with a wrong export
    granian = rows[("granian", 10, None)]
    assert (granian["trials"], granian["failed"], granian["unserved"]) == (3, 10, 10)
    assert granian["rps_low"] < granian["rps"] < granian["rps_high"]
    assert rows[("gunicorn-sync", 10, None)]["failed"] == 7
    assert rows[("granian", 100, 2000.0)]["unserved"] == 35


def test_the_csv_carries_the_interval_and_failure_columns() -> None:
    """The CSV's interval columns are the points' (empty for a single trial), the failure
    columns whole numbers."""
    records, _ = load_records(EXPORT)
    parsed = list(csv.DictReader(io.StringIO(export(records, "csv"))))
    by_server = {(r["server"], r["concurrency"]): r for r in parsed}
    single = by_server[("gunicorn-sync", "10")]
    assert single["rps_low"] == single["rps_high"] == single["p99_ms_low"] == ""
    three = by_server[("granian", "10")]
    want = _oracle()[("granian", 10, None)]
    for column in ("rps_low", "rps_high", "p99_ms_low", "p99_ms_high"):
        assert float(three[column]) == pytest.approx(want[column], abs=1e-3)
    assert (three["failed"], three["unserved"]) == ("10", "10")


def test_each_point_says_its_app_flavor() -> None:
    """app_flavor is a column (export version 3): framework for records before it, raw for a
    raw-app point, which is a point of its own."""
    from dataclasses import replace

    from bench.report.export import EXPORT_VERSION

    records, _ = load_records(RECORDS)
    assert EXPORT_VERSION == 3 and "app_flavor" in COLUMNS
    assert {r["app_flavor"] for r in points(records)} == {"framework"}
    raw = [replace(r, app_flavor="raw") for r in records]
    rows = points([*records, *raw])
    assert len(rows) == 2 * len(points(records))
    assert all(r["via"].endswith(", raw app") for r in rows if r["app_flavor"] == "raw")
