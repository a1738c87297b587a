"""A study's verdict: each [[check]] decided by the interval over its two arms' trials.

Input: a study's checks and its records of one run (a record is a trial: one value per record
for each side of a check). Output: per check an Outcome (`reproduced`, `not reproduced` or
`inconclusive` with the reason, how it held, the line the section shows) and the verdict over
them: `reproduced`, `partly reproduced`, `not reproduced` or `inconclusive`.

Each check calls bench.report.stats.decide() on the two arms' per-trial values, its interval
Bonferroni-corrected over the study's checks (`family`): the check is decided only when the
interval lies wholly on one side; otherwise, with one trial, a zero figure in a ratio, or a
CPU quota that never throttled either arm, it is inconclusive and says why.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from bench.core.record import Record
from bench.report.cells import figure
from bench.report.production import quota_bound
from bench.report.stats import Difference, decide, shift
from bench.studies.metrics import counted, fraction_rates, metric_value
from bench.studies.schema import Study

ONE_TRIAL = "one trial"


@dataclass(frozen=True)
class Outcome:
    """One check judged: its result word and the line the section shows."""

    check: dict
    result: str  # reproduced, not reproduced, inconclusive
    line: str
    held: str  # "holds", "does not hold", "within", "outside", "inconclusive", "not measured"


def side_records(
    records: list[Record], side: dict, rates: dict[tuple[str, str], float], metric: str = ""
) -> list[Record] | None:
    """The ok records (trials) of a check's side (and failed ones for a metric counted on
    them: OOM kills); None when its fraction's rate was never derived (the second phase did
    not run)."""
    rate = None
    if "fraction" in side:
        rate = rates.get((side["arm"], f"{side['fraction']:g}"))
        if rate is None:
            return None
    return [
        r
        for r in records
        if counted(r, metric or "")
        and str(r.metadata.get("study_arm")) == side["arm"]
        and ("concurrency" not in side or r.concurrency == side["concurrency"])
        and ("scenario" not in side or r.scenario == side["scenario"])
        and (rate is None or r.offered_rps == rate)
    ]


def trial_values(recs: list[Record], metric: str) -> list[float]:
    """One value per trial (record) that measured the metric."""
    values = (metric_value(r, metric) for r in recs)
    return [float(v) for v in values if v is not None]


def _cells(recs: list[Record]) -> int:
    return len({(r.scenario, r.concurrency, r.offered_rps) for r in recs})


def quota_unbound(recs: list[Record]) -> str | None:
    """Why a comparison under a CPU quota says nothing about the quota: it throttled neither
    arm in any trial (None: no quota, it bound somewhere, or the arms are under a memory
    limit, which is then what they compare)."""
    if any((r.container or {}).get("memory_bytes") is not None for r in recs):
        return None  # under a memory limit the memory limit is what is compared
    bound = [quota_bound(r) for r in recs]
    if not any(b is not None for b in bound) or any(bound):
        return None
    return "the CPU quota did not bind (0 ms throttled in every trial of both arms)"


def _scaled(check: dict) -> tuple[str, float, float]:
    """The check as decide() asks it of B = a × scale against A = b: the claim, the scale,
    the margin. less: a/b below 1; at_most: a/(b × factor) below 1; ratio: a/b within a
    factor `band` of the published ratio, i.e. a/(b × published) within ±(band − 1)."""
    if check["kind"] == "less":
        return "lower", 1.0, 0.05
    if check["kind"] == "at_most":
        return "lower", 1 / float(check.get("factor", 1)), 0.05
    return "equal", 1 / float(check["published"]), float(check.get("band", 2.0)) - 1


def _interval_text(diff: Difference, scale: float, n: int, family: int) -> str:
    low, high = (diff.low or 0.0) / scale, (diff.high or 0.0) / scale
    return (
        f"a/b {(diff.ratio or 0.0) / scale:.2f}× [{low:.2f}–{high:.2f}], {n} trials a side, "
        f"95 % over {family} check{'s' if family != 1 else ''}"
    )


def _shift_outcome(check: dict, a: list[float], b: list[float], family: int) -> tuple[str, str]:
    """less / at_most where a figure is zero (a count, a share): a − b × factor on the
    figures' own scale."""
    factor = float(check.get("factor", 1)) if check["kind"] == "at_most" else 1.0
    moved = shift([x * factor for x in b], a, family)
    if moved is None:
        return "inconclusive", ONE_TRIAL
    text = (
        f"a − b{f' × {factor:g}' if factor != 1 else ''} {moved.diff:+.3g} "
        f"[{moved.low:+.3g}, {moved.high:+.3g}], {moved.n} trials a side, 95 % over {family} "
        f"check{'s' if family != 1 else ''}"
    )
    strict = check["kind"] == "less"  # less: a < b; at_most: a <= b × factor
    if moved.high < 0 or (not strict and moved.high <= 0):
        return "reproduced", text
    if moved.low > 0 or (strict and moved.low >= 0):
        return "not reproduced", text
    return "inconclusive", text + ": the interval contains 0"


def _decided(check: dict, a: list[float], b: list[float], family: int) -> tuple[str, str]:
    """The result word and its reason for one check's per-trial values."""
    claim, scale, margin = _scaled(check)
    judged = decide(b, [x * scale for x in a], claim, margin=margin, family=family)
    if min(len(a), len(b)) < 2:
        return "inconclusive", ONE_TRIAL if min(len(a), len(b)) == 1 else judged.reason
    if judged.difference.log_se is None:  # a zero figure: no log, no ratio
        if check["kind"] == "ratio":
            return "inconclusive", "a zero figure has no ratio"
        return _shift_outcome(check, a, b, family)
    text = _interval_text(judged.difference, scale, min(len(a), len(b)), family)
    result = judged.outcome
    low, high = judged.difference.low, judged.difference.high
    if check["kind"] == "at_most" and result == "not reproduced" and low == high == 1.0:
        result = "reproduced"  # identical trials: a = b × factor is "at most"
    if result == "inconclusive":
        edge = "the band's edge" if claim == "equal" else "1.00×"
        text += f": the interval crosses {edge}"
    return result, text


HELD = {
    "less": {"reproduced": "holds", "not reproduced": "does not hold"},
    "at_most": {"reproduced": "holds", "not reproduced": "does not hold"},
    "ratio": {"reproduced": "within", "not reproduced": "outside"},
}


def outcome(check: dict, records: list[Record], family: int = 1) -> Outcome:
    """One check judged on a run's records (trials), its interval corrected over `family`
    checks."""
    rates = fraction_rates(records)
    what = check.get("describe", f"{check['metric']} {check['a']} vs {check['b']}")
    recs_a, recs_b = (
        side_records(records, check["a"], rates, check["metric"]),
        side_records(records, check["b"], rates, check["metric"]),
    )
    a = trial_values(recs_a or [], check["metric"])
    b = trial_values(recs_b or [], check["metric"])
    if not a or not b:
        line = f"- {what}: not measured (a run failed or had no samples) — inconclusive"
        return Outcome(check, "inconclusive", line, "not measured")
    if max(_cells(recs_a or []), _cells(recs_b or [])) > 1:
        result, reason = "inconclusive", "a side names several cells: give its concurrency"
    else:
        reason = quota_unbound([*(recs_a or []), *(recs_b or [])])
        result, reason = ("inconclusive", reason) if reason else _decided(check, a, b, family)
    held = HELD[check["kind"]].get(result, "inconclusive")
    med_a, med_b = statistics.median(a), statistics.median(b)
    if check["kind"] == "ratio":
        published, band = float(check["published"]), float(check.get("band", 2.0))
        ours = f"ours {med_a / med_b:.2f}×" if med_b else "ours –"
        head = f"published {published:.2f}×, {ours} (a factor {band:g} allowed)"
    else:
        head = f"{figure(med_a)} vs {figure(med_b)}"
    line = f"- {what}: {head} — {held}" + (
        f": {reason}" if held == "inconclusive" else f" ({reason})"
    )
    return Outcome(check, result, line, held)


def verdict(outcomes: Sequence[Outcome]) -> str:
    """The verdict over checks: reproduced / not reproduced when every check is; partly
    reproduced when checks were decided both ways; otherwise inconclusive."""
    results = {o.result for o in outcomes}
    if results == {"reproduced"}:
        return "reproduced"
    if results == {"not reproduced"}:
        return "not reproduced"
    if {"reproduced", "not reproduced"} <= results:
        return "partly reproduced"
    return "inconclusive"


def tally(outcomes: Sequence[Outcome]) -> str:
    """How the checks came out: `2 reproduced, 1 inconclusive`."""
    words = ("reproduced", "not reproduced", "inconclusive")
    counts = [(sum(o.result == w for o in outcomes), w) for w in words]
    return ", ".join(f"{n} {w}" for n, w in counts if n)


def judge(
    study: Study, records: list[Record], checks: Sequence[dict] | None = None
) -> tuple[str, list[str]]:
    """The verdict word and a line per check (what was compared, published vs ours, the
    interval or why there is none), over `checks` (default: every check of the study); the
    family is always the study's checks."""
    family = len(study.checks)
    outcomes = [outcome(c, records, family) for c in (study.checks if checks is None else checks)]
    return verdict(outcomes), [o.line for o in outcomes]
