"""bench.observe.soak and the soak section over a captured 20 s soak of granian (50 req/s on /db,
2 workers, RSS every 2 s) and the captured reload runs' per-request files."""

import dataclasses
import json
from pathlib import Path

import pytest

from bench.core.record import Record
from bench.observe import soak
from bench.report import soak as soakreport

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def _soak() -> Record:
    return Record.from_dict(json.loads((FIXTURES / "soak" / "granian-20s.record.json").read_text()))


@pytest.mark.parametrize(
    ("duration", "interval", "count"), [(20, 2, 10), (600, 5, 120), (21, 2, 11), (5, 10, 1)]
)
def test_samples_in_a_window(duration: float, interval: float, count: int) -> None:
    """Samples at 0, interval, ... strictly before the end of the window."""
    assert soak.samples_in(duration, interval) == count


def test_the_captured_soak_has_every_sample_of_every_process() -> None:
    """20 s every 2 s: 10 samples of each of granian's 3 processes, the leader among them."""
    series = _soak().series or {}
    assert series["interval_s"] == 2.0 and len(series["t_s"]) == 10
    assert series["leader_pid"] in series["rss_mb"]
    assert {len(v) for v in series["rss_mb"].values()} == {10}
    for index, total in enumerate(series["rss_total_mb"]):
        assert total == pytest.approx(sum(v[index] for v in series["rss_mb"].values()), abs=0.01)


def test_the_slope_recomputed_from_the_series() -> None:
    """The record's slope is scipy's linregress of its own series, in MB per hour."""
    series = _soak().series or {}
    slope = soak.slope_mb_per_h(series["t_s"], series["rss_total_mb"])
    assert slope == series["rss_slope_mb_per_h"]
    assert slope is not None and slope["ci_low"] < slope["slope"] < slope["ci_high"]


def test_no_slope_from_two_samples() -> None:
    """A line through two points has no interval."""
    assert soak.slope_mb_per_h([0.0, 5.0], [100.0, 101.0]) is None


def test_a_replaced_worker_leaves_nulls() -> None:
    """A worker gone after the first sample, its successor from the second: nulls, not zeros."""
    series = soak.rss_series([0.0, 5.0], [{1: 50.0, 2: 30.0}, {1: 50.0, 3: 31.0}], leader=1)
    assert series["rss_mb"] == {"1": [50.0, 50.0], "2": [30.0, None], "3": [None, 31.0]}
    assert series["rss_total_mb"] == [80.0, 81.0]


def test_responses_per_minute_from_a_captured_run() -> None:
    """A 10 s run at 300 req/s (captured): one minute, 300 responses/s, no non-2xx."""
    requests = (FIXTURES / "lifecycle" / "granian-reload.oha.requests.csv.gz").read_bytes()
    assert soak.per_minute(requests, 10) == [{"minute": 1, "responses_per_s": 300.0, "non_2xx": 0}]


def test_the_soak_section_puts_source_002_beside_ours(tmp_path: Path) -> None:
    """granian's row shows its slope and the source's 10-minute Granian figure; the plot is
    written."""
    lines = soakreport.soak_sections([_soak()], tmp_path)
    row = next(line for line in lines if line.startswith("| granian |"))
    assert "MB/h [" in row and "66.2 req/s, 0.00 % errors" in row
    assert (tmp_path / "plots" / "soak-rss.png").stat().st_size > 0


def test_a_warm_up_step_shows_in_the_whole_runs_slope_only() -> None:
    """The captured soak with its RSS replaced: a 25 MB step in the first minute of ten (pools
    filled), flat after: the whole run's slope is far above 0, the second half's interval
    holds 0; a steady leak of 10 MB/h shows in both."""
    rec = _soak()
    times = [float(t) for t in range(0, 600, 20)]
    step = [100.0 + (25.0 if t >= 60 else 0.0) + 0.01 * (i % 3) for i, t in enumerate(times)]
    leak = [100.0 + 10.0 * t / 3600 + 0.01 * (i % 3) for i, t in enumerate(times)]

    def cells(values: list[float]) -> tuple[str, str]:
        series = {**(rec.series or {}), "t_s": times, "rss_total_mb": values}
        series["rss_slope_mb_per_h"] = soak.slope_mb_per_h(times, values)
        moved = dataclasses.replace(rec, series=series)
        return soakreport.slope_text(moved), soakreport.later_slope_text(moved)

    whole, later = cells(step)
    assert float(whole.split(" MB/h")[0]) > 50
    assert later.startswith("; second half ")
    low, high = (float(x) for x in later.split("[")[1].rstrip("]").split(", "))
    assert low <= 0 <= high
    whole, later = cells(leak)
    low, high = (float(x) for x in later.split("[")[1].rstrip("]").split(", "))
    assert whole.startswith("+10.0 MB/h") and low <= 10.0 <= high and low > 5
