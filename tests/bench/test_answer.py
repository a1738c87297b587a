"""The first screen's verdicts (bench.report.answer) over the shipped reference's records: a
pick is said to lead only where the race separated it, a shared lead is said plainly, and a
pick that failed a production check in any round carries the warning mark."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from bench.core import speedclass
from bench.core.record import Record, analysed
from bench.report import recommend
from bench.report.answer import WARN, answer_section, failed_checks
from bench.report.cells import host_of

REFERENCE = Path(__file__).resolve().parents[2] / "results" / "reference"


@cache
def _records() -> tuple[Record, ...]:
    return tuple(speedclass.load(REFERENCE)[0])


@cache
def _recommendations() -> tuple[recommend.Recommendation, ...]:
    return tuple(recommend.recommendations(list(_records()))[0])


def test_a_pick_is_said_to_lead_only_where_the_race_separated_it() -> None:
    """'leads X by r×' only for a decision with an arena whose sole leader is the pick; a
    leading group of one (among the leaders everywhere, separated from none) says so."""
    records = list(_records())
    recs = _recommendations()
    assert recs
    for rec in recs:
        runs = recommend.deployment_runs(
            records, rec.machine, recommend.WORKLOADS[rec.workload], rec.deployment
        )
        decision = recommend.decide(runs)
        sole = any(a.sole_leader() is not None for a in decision.arenas)
        if rec.sure.startswith("leads "):
            assert sole, rec.sure
        if rec.server is not None and not sole and not decision.tied and not decision.equal:
            assert not rec.sure.startswith("leads "), rec.sure


def test_a_pick_that_failed_a_check_in_any_round_is_marked() -> None:
    """Every row whose pick lost requests on reload or under recycling in some analysed run of
    its machine carries the mark and names the check; the counts are over every run."""
    records = list(_records())
    lines = answer_section(records)
    recs = _recommendations()
    for rec in recs:
        if rec.server is None:
            continue
        mine = [
            r
            for r in records
            if r.server == rec.server and host_of(r) == rec.machine and analysed(r)
        ]
        lost = sum(int((r.lifecycle or {}).get("failed") or 0) for r in mine if r.lifecycle)
        found = failed_checks(rec, records)
        assert (lost > 0) == any(f.startswith("reload:") for f in found)
        row = next(
            line for line in lines if line.startswith(f"| {rec.workload} | {rec.deployment} |")
        )
        assert (WARN in row) == bool(found)


def test_no_502_in_too_few_requests_does_not_clear_the_balancer_check() -> None:
    """0 502s in 140 requests: the 95 % upper bound (2.6 %) is not below the worst server's
    2.5 %, so the check is not cleared; 0 in 100,000 clears it; any 502 fails it."""
    from bench.report.answer import _balancer_check
    from bench.report.recommend import Race

    every = [Race("a", (0, 140), None, None, None), Race("b", (10, 400), None, None, None)]
    assert "≤ 2.6 % (95 %), not below the worst server's 2.5 %" in _balancer_check((0, 140), every)
    assert _balancer_check((0, 100_000), every) == ""
    assert _balancer_check((3, 140), every).startswith("3 502s in 140 requests")


def test_the_chart_draws_one_session_of_servers_that_met_per_workload(tmp_path: Path) -> None:
    """plots/answer.png: a panel per workload of the first machine, each from one arena (one
    session and load) where two servers or more met, the row's pick among them; the section
    links it."""
    from bench.report.answer import CHART, chart_panels, write_chart

    records = list(_records())
    panels = chart_panels(records)
    assert panels
    for title, values in panels:
        assert title.count("session ") == 1 and len(values) >= 2
        assert len({label.split(" ")[0] for label in values}) >= 2  # servers, not one's knobs
    assert write_chart(records, tmp_path) == CHART
    assert (tmp_path / CHART).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"]({CHART})" in "\n".join(answer_section(records, CHART))
