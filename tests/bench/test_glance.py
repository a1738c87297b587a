"""The summary's "At a glance" section (bench.report.glance) over fixture records.

Every name from bench.report.glance is imported here at module level, never inside a test:
tests/bench/test_mutants.py runs these tests with a mutant of the module in their place.
"""

from __future__ import annotations

import copy
import dataclasses
import re
from pathlib import Path

from bench.core.record import Record, load_records
from bench.report.glance import glance_section

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "records"
OPENLOOP = Path(__file__).resolve().parent.parent / "fixtures" / "openloop" / "records"


def _search(steps: list[Record], server: str, scale: float) -> list[Record]:
    """The fixture's capacity search as another server's, every offered rate × scale."""
    out = []
    for step in steps:
        meta = copy.deepcopy(step.metadata)
        meta["capacity"]["search"] = f"{server}-search"
        out.append(
            dataclasses.replace(
                step,
                server=server,
                offered_rps=step.offered_rps * scale,  # type: ignore[operator]
                metadata=meta,
                run_id=f"{server}-{step.run_id}",
            )
        )
    return out


def _rounds(steps: list[Record], jitter: tuple[float, float, float]) -> list[Record]:
    """One search's steps as 3 rounds (trials), round t's rates × jitter[t - 1]."""
    return [
        dataclasses.replace(s, trial=t, offered_rps=s.offered_rps * jitter[t - 1])  # type: ignore[operator]
        for t in (1, 2, 3)
        for s in steps
    ]


def test_the_capacity_line_compares_the_best_with_the_next_not_the_last() -> None:
    """Three capacity searches of 3 rounds each, the fixture's (gunicorn-sync) and two at
    1.5× and 2× its rates, each round's rates moved a little: the line names the best (2×)
    and its paired ratio to the next (1.5×): 1.34× (the geometric mean of 2/1.5 × 1, 1.02 /
    0.98, 0.99 / 1.01), not about 2× to the last."""
    records, _ = load_records(OPENLOOP)
    steps = [r for r in records if r.metadata.get("capacity")]
    assert {r.server for r in steps} == {"gunicorn-sync"}
    three = (
        _rounds(steps, (1.0, 1.0, 1.0))
        + _rounds(_search(steps, "uwsgi", 1.5), (1.0, 0.98, 1.01))
        + _rounds(_search(steps, "granian", 2.0), (1.0, 1.02, 0.99))
    )
    (line,) = [line for line in glance_section(three) if line.startswith("- Capacity")]
    assert "**granian" in line
    match = re.search(r", ([0-9.]+)× \[[0-9.]+–[0-9.]+\] (\S+)", line)
    assert match, line
    assert match.group(2) == "uwsgi"
    assert float(match.group(1)) == 1.34
    assert line.endswith("decided in 3 round(s): granian > uwsgi > gunicorn-sync."), line


def test_identical_trials_are_untestable_not_significant() -> None:
    """Two configurations with 3 identical trials each (1,100 against 1,000 req/s, as
    rounded figures give): the margin says untestable for lack of spread, not
    "significant" and not "1 trial"."""
    records, _ = load_records(FIXTURES)
    (first, second) = [
        r for r in records if r.server == "granian" and r.scenario == "plaintext"
        and r.concurrency == 10 and r.arch == "amd64" and r.status == "ok"
    ]  # fmt: skip
    point = []
    for server, rps in (("granian", 1100.0), ("uwsgi", 1000.0)):
        for trial in range(1, 4):
            base = first if trial % 2 else second
            point.append(
                dataclasses.replace(
                    base, server=server, rps=rps, trial=trial, run_id=f"{server}-{trial}"
                )
            )
    rows = [line for line in glance_section(point) if line.startswith("| plaintext")]
    assert rows, glance_section(point)
    (margin,) = [cell for cell in rows[0].split(" | ") if cell.startswith("1.10× vs uwsgi")]
    assert margin.endswith(", untestable (identical trials, no spread)")


def test_a_server_that_left_connections_unserved_is_never_best() -> None:
    """Two configurations at c50, 3 trials each: uwsgi serves 16 % of its connections (by
    Little's law: mean 0.4 ms × 19,354 req/s / 50), so its p99 of about 1.7 ms times only the
    requests it accepted, and its req/s is what the few connections it served got; granian
    serves every connection with a p99 near 40 ms. uwsgi is ranked apart, never best: granian
    is best by req/s and by p99, and the caveat names uwsgi. With uwsgi serving its
    connections too, it is best by both again."""
    records, _ = load_records(FIXTURES)
    base = next(
        r for r in records if r.server == "granian" and r.scenario == "plaintext"
        and r.arch == "amd64" and r.status == "ok"
    )  # fmt: skip

    def point(uwsgi_mean: float) -> list[Record]:
        out = []
        for trial in range(1, 4):
            jitter = 1 + trial / 100
            for server, rps, mean, p99 in (
                ("uwsgi", 19_354.0 * jitter, uwsgi_mean, 1.7 * jitter),
                ("granian", 1_200.0 * jitter, 40.0, 41.0 * jitter),
            ):
                latency = {**base.latency_ms, "mean": mean, "p99": p99}
                out.append(
                    dataclasses.replace(
                        base, server=server, rps=rps, concurrency=50, latency_ms=latency,
                        trial=trial, run_id=f"{server}-{trial}",
                    )
                )  # fmt: skip
        return out

    (row,) = [x for x in glance_section(point(0.41)) if x.startswith("| plaintext")]
    cells = row.split(" | ")
    for best in (cells[2], cells[5]):  # by req/s (uwsgi's is 16 times granian's), by p99
        assert best.startswith("granian") and "uwsgi" not in best
    assert cells[-1].startswith("† unserved connections: uwsgi w2 t4 b1024 ranked apart, never")
    (served,) = [x for x in glance_section(point(2.6)) if x.startswith("| plaintext")]
    assert served.split(" | ")[2].startswith("uwsgi")
    assert served.split(" | ")[5].startswith("uwsgi")
    assert "unserved" not in served


def test_locusts_figures_carry_their_caveat() -> None:
    """The SaaS mix under Locust: its p99 is a response-time bucket (a 3 s upstream call
    reads "3,000") and its req/s the users' own pacing: the row's caveats say both; a wrk
    row says nothing of it."""
    records, _ = load_records(FIXTURES)
    base = next(
        r for r in records if r.server == "granian" and r.scenario == "plaintext"
        and r.arch == "amd64" and r.status == "ok"
    )  # fmt: skip
    saas = [
        dataclasses.replace(
            base, scenario="saas", load_tool="locust", concurrency=20, rps=29.9 * (1 + t / 100),
            latency_ms={**base.latency_ms, "p99": 3000.0}, trial=t, run_id=f"saas-{t}",
        )
        for t in (1, 2, 3)
    ]  # fmt: skip
    (row,) = [x for x in glance_section(saas) if x.startswith("| saas")]
    assert "Locust: percentiles are its response-time buckets" in row
    assert "req/s is set by its users' own pacing" in row
    (plain,) = [x for x in glance_section([base]) if x.startswith("| plaintext")]
    assert "Locust" not in plain
