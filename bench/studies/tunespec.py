"""Study arms tuned by make tune's search: the `tune` keys of a study file, validated.

Input: the parsed TOML of a study file (its [[arm]] tables' `tune`, its [tune] table, its
checks of kind "tuned") and the server declarations. Output: each arm's search space
(`ArmTune`: knob -> the values as written, or the server.toml's declared space), the
study's `TuneTable` (objective, budget minutes, margin, why), the "tuned" check mapped onto
the kind of check that judges it (`as_judged`), or StudyError naming the file and the key
(bench.cli prints it in one line, exit 2, before anything starts).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bench.core import defaults
from bench.core.registry import CPUS_VALUE, ServerSpec
from bench.core.studyfile import StudyError
from bench.core.validate import limits

OBJECTIVES = ("rps", "p99")  # make tune's OBJECTIVE= (bench.harness.tuner.UNITS)
TUNE_KEYS = ("objective", "budget", "margin", "why")
# A "tuned" check's metrics, and whether more of the metric is better.
TUNED_METRICS = {"rps": True, "p99_ms": False}
EXPECT = ("at_least", "better")  # the tuned arm equal or better / decided better


@dataclass(frozen=True)
class TuneTable:
    """The study's [tune] table: what each tuned arm's search optimises, within what."""

    objective: str
    budget_min: int
    margin: float  # a fraction
    why: str


def _value_ok(value: object) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return value > 0
    return isinstance(value, str) and CPUS_VALUE.match(value) is not None


def arm_space(where: str, raw: object) -> dict[str, tuple[str, ...]] | bool | None:
    """An arm's `tune`: true (the server.toml's space), a table knob -> values (whole
    numbers, "cpus" or "<k>*cpus"), or None (not tuned)."""
    if raw is None:
        return None
    if raw is True:
        return True
    example = "tune = { workers = [1, 2, 4], threads = [1, 2, 4, 8] } or tune = true"
    if not isinstance(raw, dict) or not raw:
        raise StudyError(f"{where}: tune must be a table of knob = [values] or true: {example}")
    for knob, values in raw.items():
        if not (isinstance(values, list) and values and all(_value_ok(v) for v in values)):
            raise StudyError(
                f"{where}: tune.{knob} must be a list of whole numbers > 0, 'cpus' or "
                f"'<k>*cpus'; e.g. {example}"
            )
    return {k: tuple(str(v) for v in values) for k, values in raw.items()}


def check_arm_space(where: str, space: dict | bool, spec: ServerSpec, knobs: dict) -> None:
    """The space against the server: knobs it declares, none also fixed by `knobs`, and for
    `tune = true` a declared space."""
    if space is True:
        if not any(k.tune for k in spec.knobs.values()):
            searched = [s for s in ("workers",) if s in spec.knobs]
            raise StudyError(
                f"{where}: tune = true but server {spec.id} declares no tune space; valid: "
                f"tune = {{ {searched[0] if searched else 'workers'} = [1, 2, 4] }}"
            )
        return
    assert isinstance(space, dict)
    unknown = sorted(set(space) - set(spec.knobs))
    if unknown:
        raise StudyError(
            f"{where}: tune names {unknown}, not knobs of {spec.id}; valid: {', '.join(spec.knobs)}"
        )
    both = sorted(set(space) & set(knobs))
    if both:
        raise StudyError(f"{where}: {both} are both searched (tune) and fixed (knobs): keep one")


def check_arm_shape(where: str, settings: dict, derived: bool, open_loop: bool) -> None:
    """A tuned arm is searched at one point: one scenario and one concurrency, closed loop,
    through the stack (not in a namespace, not from the first phase)."""
    scenarios = settings.get("scenarios", [settings.get("scenario", defaults.STUDY_SCENARIO)])
    concurrency = settings.get("concurrency", defaults.STUDY_CONCURRENCY)
    if derived or open_loop or settings.get("namespace"):
        raise StudyError(
            f"{where}: a tuned arm is searched closed loop through the stack: no load = "
            "'oha', rates, from_best or namespace"
        )
    if len(scenarios) != 1 or len(concurrency) != 1:  # type: ignore[arg-type]
        raise StudyError(
            f"{where}: a tuned arm is searched at one point: give it scenarios = ['<one>'] "
            "and concurrency = [<one>]"
        )


def tune_table(path: Path, raw: object, tuned: list[str]) -> TuneTable | None:
    """[tune]: required when an arm is tuned, refused when none is; known keys and values."""
    if raw is None:
        if tuned:
            raise StudyError(
                f"{path}: arms {', '.join(tuned)} are tuned: add [tune] with objective = "
                "'rps', budget = <minutes>, margin = <percent>, why = '...'"
            )
        return None
    if not tuned:
        raise StudyError(f"{path}: [tune] without a tuned arm: give an arm tune = {{ ... }}")
    assert isinstance(raw, dict)
    unknown = sorted(set(raw) - set(TUNE_KEYS))
    missing = [k for k in TUNE_KEYS if k not in raw]
    if unknown or missing:
        raise StudyError(
            f"{path}: [tune] keys: unknown {unknown}, missing {missing}; valid: "
            f"{', '.join(TUNE_KEYS)}"
        )
    if raw["objective"] not in OBJECTIVES:
        raise StudyError(
            f"{path}: [tune] objective = {raw['objective']!r}; valid: {', '.join(OBJECTIVES)}"
        )
    for key in ("budget", "margin"):
        low, high = limits(key)
        value = raw[key]
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise StudyError(f"{path}: [tune] {key} must be a whole number in {low}..{high}")
    if not isinstance(raw["why"], str) or not raw["why"].strip():
        raise StudyError(f"{path}: [tune] why must say why the budget and margin are these")
    return TuneTable(str(raw["objective"]), raw["budget"], raw["margin"] / 100, raw["why"])


def check_tuned_check(path: Path, check: dict, tuned: list[str]) -> None:
    """A check of kind "tuned": `a` a tuned arm, a metric with a direction, a known expect."""
    if check["a"].get("arm") not in tuned:
        raise StudyError(
            f"{path}: a tuned check's a = {{ arm = ... }} must name a tuned arm; valid: "
            f"{', '.join(tuned) or 'none (no arm has tune)'}"
        )
    if check.get("metric") not in TUNED_METRICS:
        raise StudyError(
            f"{path}: a tuned check's metric must be one of {', '.join(TUNED_METRICS)}"
        )
    if check.get("expect", EXPECT[0]) not in EXPECT:
        raise StudyError(f"{path}: a tuned check's expect must be one of {', '.join(EXPECT)}")


def as_judged(check: dict) -> dict:
    """A "tuned" check as the check that judges it (other checks unchanged): expect =
    "better": `less` with the worse-if-it-holds side first; "at_least": `at_most` (the other
    arm at most the tuned one, or equal within the margin)."""
    if check.get("kind") != "tuned":
        return check
    higher = TUNED_METRICS[check["metric"]]
    tuned, other = check["a"], check["b"]
    first, second = (other, tuned) if higher else (tuned, other)
    sides = {"a": first, "b": second, "swapped": first is other}  # swapped: a/b reads b/a
    if check.get("expect", EXPECT[0]) == "better":
        return {**check, "kind": "less", **sides}
    return {**check, "kind": "at_most", "factor": 1, **sides}
