"""The summary's open-loop sections over real records: a capacity search (gunicorn-sync, one
worker, /sleep?ms=10, p99 <= 100 ms) and two trials of granian at 2,000 req/s on /plaintext
with their per-request files (tests/fixtures/openloop/, made by `make capacity` and
`make bench LOAD=oha` on the project's machine)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bench.core.record import load_records
from bench.load.oha import latency_summary_ms, per_request_latencies_ms
from bench.report.openloop import capacity_sections, open_loop_sections, write_knee_plots
from bench.report.stats import quantile_interval

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "openloop"


@pytest.fixture
def results(tmp_path: Path) -> Path:
    """A copy of the fixture results (plots are written into it)."""
    return Path(shutil.copytree(FIXTURES, tmp_path / "results"))


def test_capacity_table_gives_the_confirmed_capacity_and_what_lies_past_it(results: Path) -> None:
    """The row says 90 req/s (the confirmed step), no errors seen, p99 at 50 % and 80 %, and
    at 120 %/150 % the rate the server still served with its p99."""
    records, problems = load_records(results)
    assert not problems
    lines = capacity_sections(records, results, {})
    (row,) = [line for line in lines if line.startswith("| gunicorn-sync")]
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert cells[2] == "90" and cells[3] == "none seen"
    assert float(cells[4]) < 20 and float(cells[5]) < 20  # p99 ms at 45 and 72 req/s
    achieved, p99, failed, overflows = (c.strip() for c in cells[6].split(", "))
    assert float(achieved) < 100 and float(p99.replace(",", "")) > 100 and failed == "0"
    assert overflows == "0"  # the kernel's queue (backlog 2048) never filled
    assert "### Capacity at p99 ≤ 100 ms: sleep (`/sleep?ms=10`)" in lines


def test_knee_plot_per_scenario_and_objective(results: Path) -> None:
    """One PNG per (scenario, objective), linked by its key."""
    records, _ = load_records(results)
    plots = write_knee_plots(results, [r for r in records if "capacity" in r.metadata])
    assert plots == {"knee-sleep-100": "plots/knee-sleep-100.png"}
    assert (results / plots["knee-sleep-100"]).stat().st_size > 10_000


def test_fixed_rate_latencies_are_merged_over_every_request_of_the_trials(results: Path) -> None:
    """Two trials at 2,000 req/s: the row's percentiles are those of all their requests
    together (from the per-request files), not medians of each trial's percentiles."""
    records, _ = load_records(results)
    lines = open_loop_sections(records, results)
    (row,) = [line for line in lines if line.startswith("| granian")]
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    files = sorted((results / "raw").glob("*granian*.oha.requests.csv.gz"))
    assert len(files) == 2
    samples = [s for f in files for s in per_request_latencies_ms(f)]
    merged = latency_summary_ms(samples)
    p99_cell = cells.pop(7)
    assert cells[5:9] == [f"{merged[k]:,.2f}" for k in ("p50", "p90", "p999", "max")]
    # p99 with the distribution-free interval of every request of both trials
    _, low, high = quantile_interval(samples, 0.99)
    assert p99_cell == f"{merged['p99']:,.2f} [{low:,.2f}–{high:,.2f}]"
    assert low <= merged["p99"] <= high
    cells.insert(7, p99_cell)
    assert cells[3] == "2,000" and cells[14] == "2"  # offered, trials
    assert "intended send time" in "\n".join(lines)


def test_no_open_loop_records_no_section(tmp_path: Path) -> None:
    """A results set of closed-loop runs only gets no open-loop section."""
    assert open_loop_sections([], tmp_path) == []
