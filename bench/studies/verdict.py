"""A study's verdict: each [[check]] judged on the ratios measured in one run.

Input: a study's checks and its records of one run. Output: per check an Outcome (its result
word, how it held, the line the section shows) and the verdict over them: `reproduced`,
`partly reproduced` or `not reproduced`.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from bench.core.record import Record
from bench.studies.metrics import Cell, fmt, fraction_rates, measured
from bench.studies.schema import Study


def _value(
    values: dict[Cell, float | None], side: dict, rates: dict[tuple[str, str], float]
) -> float | None:
    rate = None
    if "fraction" in side:
        rate = rates.get((side["arm"], f"{side['fraction']:g}"))
        if rate is None:
            return None
    found = [
        v
        for (arm, scenario, conc, offered), v in values.items()
        if arm == side["arm"]
        and ("concurrency" not in side or conc == side["concurrency"])
        and ("scenario" not in side or scenario == side["scenario"])
        and (rate is None or offered == rate)
    ]
    present = [v for v in found if v is not None]
    return statistics.median(present) if present else None


@dataclass(frozen=True)
class Outcome:
    """One check judged: its result word and the line the section shows."""

    check: dict
    result: str  # reproduced, partly reproduced, not reproduced
    line: str
    held: str  # "holds", "does not hold", "within", "outside", "not measured"


def outcome(check: dict, records: list[Record]) -> Outcome:
    """One check judged on a run's records."""
    values = measured(records, check["metric"])
    rates = fraction_rates(records)
    a, b = _value(values, check["a"], rates), _value(values, check["b"], rates)
    what = check.get("describe", f"{check['metric']} {check['a']} vs {check['b']}")
    if a is None or b is None or (check["kind"] == "ratio" and b == 0):
        line = f"- {what}: not measured (a run failed or had no samples)"
        return Outcome(check, "not reproduced", line, "not measured")
    if check["kind"] in ("less", "at_most"):
        # less: a < b; at_most: a <= b × factor (e.g. "no faster, within 10 %")
        held = a < b if check["kind"] == "less" else a <= b * float(check.get("factor", 1))
        word = "holds" if held else "does not hold"
        line = f"- {what}: {fmt(a)} vs {fmt(b)} — {word}"
        return Outcome(check, "reproduced" if held else "not reproduced", line, word)
    ours = a / b
    published = float(check["published"])
    band = float(check.get("band", 2.0))
    same_side = (ours > 1) == (published > 1)
    within = published / band <= ours <= published * band
    line = (
        f"- {what}: published {published:.2f}×, ours {ours:.2f}× "
        f"({'within' if within else 'outside'} a factor {band:g} of the published ratio"
        f"{'' if within or not same_side else ', same direction'})"
    )
    result = "reproduced" if within else ("partly reproduced" if same_side else "not reproduced")
    return Outcome(check, result, line, "within" if within else "outside")


def verdict(outcomes: list[Outcome]) -> str:
    """The verdict over checks: reproduced when all are, not reproduced when none is."""
    results = [o.result for o in outcomes]
    if all(r == "reproduced" for r in results):
        return "reproduced"
    if all(r == "not reproduced" for r in results):
        return "not reproduced"
    return "partly reproduced"


def judge(
    study: Study, records: list[Record], checks: Sequence[dict] | None = None
) -> tuple[str, list[str]]:
    """The verdict word and a line per check (what was compared, published vs ours), over
    `checks` (default: every check of the study)."""
    outcomes = [outcome(c, records) for c in (study.checks if checks is None else checks)]
    return verdict(outcomes), [o.line for o in outcomes]
