"""Plots: at most 8 leading series (baselines apart), the capacity interval read defensively,
the race and reload figures' data taken from real records."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from bench.core.outcome import Outcome
from bench.core.record import Record, load_records
from bench.report.figures import race_data, reload_timeline
from bench.report.openloop import knee_series
from bench.report.plots import MAX_SERIES, Knee, leading, plot_knee

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_leading_keeps_the_best_eight_and_never_a_baseline() -> None:
    lines = {f"s{i} w2": [(10, float(i), 1.0)] for i in range(12)}
    lines["nginx-static"] = [(10, 1e6, 0.1)]
    shown = leading(lines)
    assert len(shown) == MAX_SERIES and "nginx-static" not in shown
    assert shown[0] == "s11 w2" and "s0 w2" not in shown


def test_the_knee_marks_the_reported_crossing_with_its_interval() -> None:
    """The knee plot's capacity is the summary's (the crossing of repeated steps,
    bench.report.openloop.capacity_estimate) with its interval, for every search."""
    records, _ = load_records(FIXTURES / "openloop" / "records")
    for knees in knee_series(records).values():
        for knee in knees:
            assert knee.capacity is not None
            if knee.interval is not None:
                low, high = knee.interval
                assert low <= knee.capacity <= high


def test_knee_plot_draws_steps_out_of_search_order(tmp_path: Path) -> None:
    knee = Knee(
        "granian", [(400, 5.0, True), (100, 3.0, True), (800, 90.0, False)], 400.0, (380.0, 420.0)
    )
    plot_knee("db", 50, [knee], tmp_path / "knee.png")
    assert (tmp_path / "knee.png").stat().st_size > 10_000


def test_race_data_counts_every_502_of_the_records() -> None:
    records, _ = load_records(FIXTURES / "lb-race" / "records")
    arms = race_data(records)
    assert arms
    total = sum(n502 for gaps in arms.values() for _, _, n502 in gaps)
    proxied = sum(int((r.errors or {}).get("proxy_by_status", {}).get("502", 0)) for r in records)
    assert total == proxied


def test_reload_timeline_counts_arrivals_not_served_in_time(tmp_path: Path) -> None:
    """Bins start at −(signal second); a run with no failure and no stall has almost none
    late, a bin's count never exceeds the arrivals due in it (rate × bin)."""
    results = tmp_path / "results"
    record = FIXTURES / "lifecycle" / "gunicorn-sync-reload.record.json"
    rec = Record.from_dict(json.loads(record.read_text()))
    raw = results / rec.raw_files[1]
    raw.parent.mkdir(parents=True)
    shutil.copy(FIXTURES / "lifecycle" / "gunicorn-sync-reload.oha.requests.csv.gz", raw)
    xs, late = reload_timeline(rec, results)
    assert xs[0] == -round(rec.lifecycle["at_s"], 3)
    assert max(late) <= rec.offered_rps * 0.5 + 1
    assert sum(late) >= Outcome.of_record(rec).failed - (rec.errors or {}).get("unsent", 0)
