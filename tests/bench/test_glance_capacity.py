"""At a glance (beside test_glance.py): the load tool's saturation caveat (records built from
tests/fixtures/records),
and the capacity line (bench.report.capacities' race), over a fixture of three capacity searches
(tests/fixtures/capacity-pair/: /sleep at p99 <= 100 ms, each rate stepped once in
each of 3 trials, every trial passing at the lowest rate, 2 of 3 at the middle one, none at
the highest): gunicorn-sync at 80/90/100 req/s twice (two starts of one configuration, the
same verdicts) and granian at 160/180/200 req/s.

Expected values computed by hand: pass shares 1, 2/3, 0 cross 1/2 a quarter of the way from
the middle rate to the highest on log rate, so each capacity is 90 × (100/90)^¼ = 92.4 req/s
(twice that for granian) and its interval is the bracket of sure rates, [80, 100] (the
ladder has nothing beyond it); granian/gunicorn-sync is 2.00 in every round.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from bench.core.record import Record, load_records
from bench.report.glance import glance_section
from bench.report.openloop import capacity_estimate, searches
from bench.report.stats import capacity_ratio

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
FIXTURE = FIXTURES / "capacity-pair"
LINE = re.compile(
    r"- Capacity at p99 ≤ 100 ms, sleep: \*\*(?P<best>[^*]+)\*\* (?P<cap>\S+) \[(?P<lo>[\d,]+)–"
    r"(?P<hi>[\d,]+)\] req/s, (?P<ratio>[\d.]+)× \[(?P<rlo>[\d.]+)–(?P<rhi>[\d.]+)\] "
    r"(?P<next>[^(]+) \("
)


def _records(*servers: str) -> list[Record]:
    records, bad = load_records(FIXTURE)
    assert bad == [] and len(records) == 27
    return [r for r in records if r.server in servers]


def _capacity_line(records: list[Record]) -> str:
    lines = [line for line in glance_section(records) if line.startswith("- Capacity at")]
    assert len(lines) == 1, lines
    return lines[0]


def test_each_search_s_capacity_and_its_two_sided_interval() -> None:
    """Each search: 92.4 (or 184.8) req/s with exactly [80, 100] (or [160, 200]) at 95 % and
    at 97.5 %: neither one-sided nor wider than the ladder."""
    found = searches(_records("granian", "gunicorn-sync"))[(100, "sleep")]
    assert len(found) == 3
    for steps in found.values():
        scale = 2.0 if steps[0].server == "granian" else 1.0
        for confidence in (0.95, 0.975):
            cap = capacity_estimate(steps, confidence)
            assert cap.center == pytest.approx(scale * 90 * (100 / 90) ** 0.25)
            assert (cap.low, cap.high) == (scale * 80.0, scale * 100.0)
            assert cap.trials_at_knee == 9 and not cap.bracket_only


def test_two_servers_capacities_compare_by_the_race_on_paired_rounds() -> None:
    """The summary names granian first, 2.00× gunicorn-sync: the same ratio in every round
    (each trial's crossing of granian's ladder is exactly twice gunicorn-sync's), so the
    race has no spread to test and says undecided, with no interval (the old line gave
    [1.60–2.50] from the two capacities' own intervals, "separated")."""
    line = _capacity_line(_records("granian", "gunicorn-sync"))
    assert line.startswith("- Capacity at p99 ≤ 100 ms, sleep: **granian ")
    assert "185 [160–200] req/s, 2.00× gunicorn-sync " in line
    assert "(92 [80–100] req/s): undecided (the same ratio every round" in line
    assert "granian ? gunicorn-sync" in line


def test_a_configuration_is_not_compared_with_its_own_second_search() -> None:
    """Two searches of gunicorn-sync in one session: its rounds, pooled, with nothing to
    compare (issue 32 item 9: "granian 3,633 vs 3,566" were two searches of one server);
    capacity_ratio of a capacity with itself stays 1 with [low/high, high/low]."""
    line = _capacity_line(_records("gunicorn-sync"))
    assert LINE.match(line) is None and "×" not in line
    assert line.endswith("nothing to compare).")
    (steps, _) = searches(_records("gunicorn-sync"))[(100, "sleep")].values()
    cap = capacity_estimate(steps, 0.975)
    ratio = capacity_ratio(cap, cap)
    assert ratio is not None
    assert ratio[0] == 1.0 and ratio[1] == pytest.approx(0.8) and ratio[2] == pytest.approx(1.25)


def _load_cpu(pct: float) -> list[Record]:
    """Two configurations, 3 trials each at c50 with wrk on 2 threads; one trial of granian
    shows wrk at `pct` % CPU (100 = one core) and the others at 40 %."""
    records, _ = load_records(FIXTURES / "records")
    base = next(r for r in records if r.server == "granian" and r.scenario == "plaintext")
    out = []
    for server, rps in (("granian", 20_000.0), ("gunicorn-sync", 6_000.0)):
        for trial in (1, 2, 3):
            cpu = pct if (server, trial) == ("granian", 2) else 40.0
            out.append(
                replace(
                    base,
                    server=server,
                    concurrency=50,
                    load_threads=2,
                    resources={**(base.resources or {}), "load_cpu_pct": cpu},
                    rps=rps + trial,
                    trial=trial,
                    run_id=f"{server[:4]}{trial}" * 4,
                )
            )
    return out


@pytest.mark.parametrize(("pct", "caveat"), [(186.0, "93%"), (170.0, None)])
def test_the_load_tool_near_saturation_caveat(pct: float, caveat: str | None) -> None:
    """wrk on 2 threads at 186 % CPU used 186 / 200 = 93 % of what its threads can: at or
    above 90 % the row says the load tool was near saturation (the figures may be the tool's
    limit, not the server's); at 170 % (85 %) it says nothing."""
    text = "\n".join(glance_section(_load_cpu(pct)))
    assert "granian" in text  # the row is there, with or without the caveat
    if caveat is None:
        assert "near saturation" not in text
    else:
        assert f"load tool near saturation ({caveat} of its CPU)" in text
