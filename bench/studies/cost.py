"""What a study costs in measured time, computed from its file: `python -m bench.studies.cost`.

Input: the study files (studies/*.toml) and a trial count (default defaults.STUDY_TRIALS).
Output: seconds of measured windows per study — arms × scenarios × (connection counts, or
offered rates for an open-loop arm) × (warmup + duration) × trials — and the README's table
of them (tests/bench/test_study.py holds the README to it). Arms in a network namespace run
in rounds like any arm when their study has checks, once when it is described (no check);
the keep-alive race's arms at most their probe (probe_limit) and
their idle gaps (race_gaps_ms × race_rounds, or race_budget where the gaps are set around
the measured close), shown as a bound and left out of the total. Tuned arms' searches (make
tune's, before the first phase) take at most their [tune] budget each: a column of its own.
Server starts, verification, the bursts and the pauses between runs come on top.
"""

from __future__ import annotations

from bench.core import defaults
from bench.load.race import within_budget
from bench.studies.schema import (
    RACE_LOAD,
    RACE_ROUNDS,
    Arm,
    Study,
    in_namespace,
    load_study,
    study_names,
)


def _runs(study: Study, arm: Arm) -> int:
    """Measured windows of one trial of an arm: per scenario, one per connection count (one
    per offered rate for an open-loop arm)."""
    settings = study.settings(arm)
    scenarios = len(settings.get("scenarios", [None]))  # type: ignore[arg-type]
    if arm.rates_from is not None:
        points = len(arm.rates_from.fractions)
    elif arm.rates:
        points = len(arm.rates)
    else:
        points = len(settings.get("concurrency", defaults.STUDY_CONCURRENCY))  # type: ignore[arg-type]
    return scenarios * points


def measured_seconds(study: Study, trials: int) -> int:
    """Seconds of warmup and measured windows of a study at `trials` trials per arm (arms in a
    namespace of a described study: one; race arms: not counted)."""
    total = 0
    for arm in study.arms:
        if arm.load == RACE_LOAD:
            continue
        settings = study.settings(arm)
        namespace = in_namespace(settings)
        # An arm in a namespace has no warmup window: a fresh server, then its one load.
        warmup = 0 if namespace else settings.get("warmup", defaults.STUDY_WARMUP_S)
        window = int(warmup) + int(settings.get("duration", 0))  # type: ignore[call-overload,arg-type]
        times = 1 if namespace and not study.judged else trials
        total += _runs(study, arm) * window * times
    return total


def race_seconds(study: Study, arm: Arm) -> float | None:
    """At most how long a race arm probes and sits in idle gaps: probe_limit, plus its gaps
    × rounds cut to race_budget, or the whole budget when the gaps are set around the
    measured close (race_offsets_ms); None when nothing bounds them."""
    settings = study.settings(arm)
    probe = float(settings.get("probe_limit", 0))  # type: ignore[arg-type]
    budget = settings.get("race_budget")
    if probe and settings.get("race_offsets_ms"):
        return None if budget is None else probe + float(budget)  # type: ignore[arg-type]
    gaps = [int(g) for g in settings.get("race_gaps_ms") or []]  # type: ignore[attr-defined]
    rounds = int(settings.get("race_rounds", RACE_ROUNDS))  # type: ignore[call-overload]
    if budget is not None:
        gaps, rounds = within_budget(gaps, rounds, float(budget))  # type: ignore[arg-type]
    return probe + sum(gaps) * rounds / 1000


def race_round_seconds(study: Study) -> float:
    """At most how long one round of a study's race arms probes and sits in idle gaps (0 for
    none; an arm nothing bounds counts 0). A study's round runs every arm: its budget is
    checked between rounds, so the first round's races run whole, whatever BUDGET says."""
    bounds = (race_seconds(study, a) for a in study.arms if a.load == RACE_LOAD)
    return sum(b for b in bounds if b is not None)


def _race_cell(study: Study) -> str:
    """A race study's cost (every arm a race arm): at most one round of its arms' probes and
    gaps (race_round_seconds), or "set by its gaps" when an arm's are not bounded."""
    if any(race_seconds(study, a) is None for a in study.arms):
        return "set by its gaps"
    return f"≤ {_minutes(round(race_round_seconds(study)))} of probes and gaps"


def search_seconds(study: Study) -> int:
    """At most how long the tuned arms' searches take: each its [tune] budget (0: none)."""
    if study.tune is None:
        return 0
    return len(study.tuned_arms) * study.tune.budget_min * 60


def _search_cell(study: Study) -> str:
    seconds = search_seconds(study)
    return f"≤ {_minutes(seconds)}" if seconds else "–"


def _minutes(seconds: int) -> str:
    return f"{seconds / 60:.1f} min"


def cost_table(trials: int = defaults.STUDY_TRIALS) -> list[str]:
    """The README's table: per study its measured time at one trial and at `trials`."""
    lines = [
        f"| `NAME` | arms | measured, 1 trial | measured, {trials} trials (default) "
        "| tuned arms' searches |",
        "|---|---:|---:|---:|---:|",
    ]
    totals = [0, 0, 0]
    for name in study_names():
        study = load_study(name)
        if all(arm.load == RACE_LOAD for arm in study.arms):
            cell = _race_cell(study)
            lines.append(f"| `{name}` | {len(study.arms)} | {cell} | {cell} | – |")
            continue
        one, many = measured_seconds(study, 1), measured_seconds(study, trials)
        totals = [totals[0] + one, totals[1] + many, totals[2] + search_seconds(study)]
        lines.append(
            f"| `{name}` | {len(study.arms)} | {_minutes(one)} | {_minutes(many)} "
            f"| {_search_cell(study)} |"
        )
    one, many, searches = (_minutes(t) for t in totals)
    return [*lines, f"| all of the above | | {one} | {many} | ≤ {searches} |"]


if __name__ == "__main__":  # python -m bench.studies.cost
    print("\n".join(cost_table()))
