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


def test_the_capacity_line_compares_the_best_with_the_next_not_the_last() -> None:
    """Three capacity searches, one the fixture's (gunicorn-sync) and two at 1.5× and 2×
    its rates: the line names the best (2×) and its ratio to the next (1.5×): 1.33×, not
    2.00× to the last."""
    records, _ = load_records(OPENLOOP)
    steps = [r for r in records if r.metadata.get("capacity")]
    assert {r.server for r in steps} == {"gunicorn-sync"}
    three = steps + _search(steps, "uwsgi", 1.5) + _search(steps, "granian", 2.0)
    (line,) = [line for line in glance_section(three) if line.startswith("- Capacity")]
    assert "**granian" in line
    match = re.search(r", ([0-9.]+)× \[[0-9.]+–[0-9.]+\] (\S+)", line)
    assert match, line
    assert match.group(2) == "uwsgi"
    assert float(match.group(1)) == 1.33
