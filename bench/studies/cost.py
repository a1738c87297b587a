"""What a study costs in measured time, computed from its file: `python -m bench.studies.cost`.

Input: the study files (studies/*.toml) and a trial count (default defaults.STUDY_TRIALS).
Output: seconds of measured windows per study — arms × scenarios × (connection counts, or
offered rates for an open-loop arm) × (warmup + duration) × trials — and the README's table
of them (tests/bench/test_study.py holds the README to it). Arms in a network namespace run
once whatever the trials; the keep-alive race's length is set by its gaps, not counted here.
Server starts, verification and the pauses between runs come on top.
"""

from __future__ import annotations

from bench.core import defaults
from bench.studies.schema import RACE_LOAD, Arm, Study, in_namespace, load_study, study_names


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
    namespace: one; race arms: not counted)."""
    total = 0
    for arm in study.arms:
        if arm.load == RACE_LOAD:
            continue
        settings = study.settings(arm)
        window = int(settings.get("warmup", defaults.STUDY_WARMUP_S))  # type: ignore[call-overload]
        window += int(settings.get("duration", 0))  # type: ignore[call-overload]
        times = 1 if in_namespace(settings) else trials
        total += _runs(study, arm) * window * times
    return total


def _minutes(seconds: int) -> str:
    return f"{seconds / 60:.1f} min"


def cost_table(trials: int = defaults.STUDY_TRIALS) -> list[str]:
    """The README's table: per study its measured time at one trial and at `trials`."""
    lines = [
        f"| `NAME` | arms | measured, 1 trial | measured, {trials} trials (default) |",
        "|---|---:|---:|---:|",
    ]
    totals = [0, 0]
    for name in study_names():
        study = load_study(name)
        if all(arm.load == RACE_LOAD for arm in study.arms):
            lines.append(f"| `{name}` | {len(study.arms)} | set by its gaps | set by its gaps |")
            continue
        one, many = measured_seconds(study, 1), measured_seconds(study, trials)
        totals = [totals[0] + one, totals[1] + many]
        lines.append(f"| `{name}` | {len(study.arms)} | {_minutes(one)} | {_minutes(many)} |")
    return [*lines, f"| all of the above | | {_minutes(totals[0])} | {_minutes(totals[1])} |"]


if __name__ == "__main__":  # python -m bench.studies.cost
    print("\n".join(cost_table()))
