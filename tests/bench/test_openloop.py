"""The summary's open-loop sections over real records: a capacity search (gunicorn-sync, one
worker, /sleep?ms=10, p99 <= 100 ms) and two trials of granian at 2,000 req/s on /plaintext
with their per-request files (tests/fixtures/openloop/, made by `make capacity` and
`make bench LOAD=oha` on the project's machine)."""

from __future__ import annotations

import re
import shutil
import statistics
from pathlib import Path

import pytest

from bench.core.record import load_records
from bench.report.cells import figure
from bench.report.openloop import capacity_sections, open_loop_sections, write_knee_plots
from bench.report.stats import estimate

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "openloop"


@pytest.fixture
def results(tmp_path: Path) -> Path:
    """A copy of the fixture results (plots are written into it)."""
    return Path(shutil.copytree(FIXTURES, tmp_path / "results"))


def test_capacity_table_gives_the_confirmed_capacity_and_what_lies_past_it(results: Path) -> None:
    """The row says 91 req/s (90 passed twice, 93 failed once: the crossing between them) with
    an interval no narrower than that bracket (one failed step does not rule out a pass
    there: it reaches past 93), marked ‡ (single steps), no errors seen, p99 at 50 % and
    80 %, and at 120 %/150 % the rate the server still served with its p99."""
    records, problems = load_records(results)
    assert not problems
    lines = capacity_sections(records, results, {})
    (row,) = [line for line in lines if line.startswith("| gunicorn-sync")]
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    center, low, high = re.fullmatch(r"(\d+) \[(\d+)–(\d+)\] ‡", cells[2]).groups()  # type: ignore[union-attr]
    assert int(center) == 91 and int(low) <= 90 and int(high) > 93, cells[2]
    assert cells[3] == "3" and cells[4] == "none seen"
    assert float(cells[5]) < 20 and float(cells[6]) < 20  # p99 ms at 45 and 72 req/s
    achieved, p99, failed, overflows = (c.strip() for c in cells[7].split(", "))
    assert float(achieved) < 100 and float(p99.replace(",", "")) > 100 and failed == "0"
    assert overflows == "0"  # the kernel's queue (backlog 2048) never filled
    assert "### Capacity at p99 ≤ 100 ms: sleep (`/sleep?ms=10`)" in lines


def test_knee_plot_per_scenario_and_objective(results: Path) -> None:
    """One PNG per (scenario, objective), linked by its key."""
    records, _ = load_records(results)
    plots = write_knee_plots(results, [r for r in records if "capacity" in r.metadata])
    assert plots == {"knee-sleep-100": "plots/knee-sleep-100.png"}
    assert (results / plots["knee-sleep-100"]).stat().st_size > 10_000


def test_fixed_rate_latencies_are_per_trial_geometric_means(results: Path) -> None:
    """Two trials at 2,000 req/s: each percentile is the geometric mean of the trials' own
    (the run is the unit), the p99 with the t interval over the two trials, never an
    order-statistic interval over their pooled requests."""
    records, _ = load_records(results)
    lines = open_loop_sections(records, results)
    (row,) = [line for line in lines if line.startswith("| granian")]
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    group = [r for r in records if r.server == "granian" and r.offered_rps == 2000]
    assert len(group) == 2
    for cell, key in zip(cells[5:10], ("p50", "p90", "p99", "p999", "max"), strict=True):
        trial = [r.latency_ms[key] for r in group]
        assert cell.split(" ")[0] == figure(statistics.geometric_mean(trial))
    est = estimate([r.latency_ms["p99"] for r in group])
    assert cells[7] == f"{figure(est.center)} [{figure(est.low)}–{figure(est.high)}]"
    assert cells[3] == "2,000" and cells[14] == "2"  # offered, trials


def test_a_single_trial_gets_a_labelled_within_run_interval(results: Path) -> None:
    """One trial: its p99 with a block-bootstrap interval marked "within-run"."""
    records, _ = load_records(results)
    one = [r for r in records if r.server == "granian" and r.offered_rps == 2000][:1]
    lines = open_loop_sections(one, results)
    (row,) = [line for line in lines if line.startswith("| granian")]
    cell = [c.strip() for c in row.strip("|").split("|")][7]
    assert cell.endswith(" within-run]") and cell.startswith(f"{one[0].latency_ms['p99']:,.2f} [")
    assert "intended send time" in "\n".join(lines)


def test_no_open_loop_records_no_section(tmp_path: Path) -> None:
    """A results set of closed-loop runs only gets no open-loop section."""
    assert open_loop_sections([], tmp_path) == []
