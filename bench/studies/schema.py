"""Study files: studies/<name>.toml read and validated, one schema for every study.

Input: the TOML: the source's claim; [run] and [[arm]] tables (a server with its knobs, the
route, concurrency, proxy, keep-alive, load tool and rates; `namespace = true` with `sysctls`:
the arm runs in a network namespace of its own, loaded by oha or by the keep-alive race);
the published figures; what decides the outcome (`[[check]]` tables judged into a verdict,
or `expect`: what the source leads us to expect, in prose, beside counts). Output: Study and
Arm, or StudyError naming the file and the key (bench.cli prints it in one line, exit 2).
"""

from __future__ import annotations

import math
import os
import re
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bench.core import defaults, plan, studyfile, validate
from bench.core.protocol import HTTP1, PROTOCOLS
from bench.core.pythons import parse_python
from bench.core.registry import load_all, protocol_refusal, python_refusal, server_ids
from bench.core.studyfile import (  # noqa: F401  (re-exported: the schema's vocabulary)
    ARM_OWN_KEYS,
    ARM_SETTINGS,
    OPEN_LOOP_KEYS,
    SETTING_TYPES,
    TOP_TYPES,
    StudyError,
    check_settings,
    read_study,
    type_name,
)
from bench.host import cgroup
from bench.load import default_name, kinds, open_loop_name, scenarios_for, tools
from bench.load.race import Race
from bench.studies.metrics import COUNT_METRICS, METRICS
from bench.studies.tunespec import (
    TuneTable,
    arm_space,
    check_arm_shape,
    check_arm_space,
    check_tuned_check,
    tune_table,
)

STUDIES_DIR = studyfile.STUDIES_DIR  # where the files are; tests point studyfile's elsewhere
RACE_KEYS = ("race_gaps_ms", "race_offsets_ms", "race_burst", "race_rounds", "probe_limit")
RACE_KEYS += ("race_budget",)
# The race's defaults, here and nowhere else: a burst of 20 concurrent requests, 10 rounds.
RACE_BURST = 20
RACE_ROUNDS = 10
RACE_LOAD = Race.name  # the race's own bursts in the namespace, not a LOAD= tool
NAMESPACE_LOADS = (open_loop_name(), RACE_LOAD)
# What an arm in a namespace is not measured with (it gets no warmup, trials, cgroup, ...).
NOT_IN_NAMESPACE = ("cpu_quota", "lifecycle", "recycle", "app_env", "paths", "scenarios")
NOT_IN_NAMESPACE += ("group", "warmup", "trials", "runtime", "cpus", "memory")
# The runtimes a study arm may name (compose is make compose-bench's own), and what the
# container runtime does not support (as bench.cli.validate_runtime refuses them).
STUDY_RUNTIMES = ("native", "docker")
CONTAINER_KEYS = ("cpus", "memory")
NOT_IN_CONTAINER = ("cpu_quota", "lifecycle", "recycle", "namespace")
# rates_from's `of`: the throughput, measured in the first phase, the rates are fractions of.
RATE_BASES = {
    "slowest-best-rps": "the lowest, over groups, of the req/s of each group's best arm",
}
RATE_MAX = 1_000_000  # as RATE= (bench.cli.LIMITS)
FRACTION_MAX = 2.0  # past 2× a measured capacity the answer is only errors
# What a check's side may name: an arm (or group), narrowed to a concurrency, a scenario, or
# (an arm with rates_from) one of its fractions.
SIDE_KEYS = ("arm", "concurrency", "scenario", "fraction")
# A configuration the source measured that cannot run today: shown as a row of its own.
NOT_RUN_KEYS = ("label", "published", "why", "instead")


@dataclass(frozen=True)
class RatesFrom:
    """Offered rates measured, not typed in: fractions of a throughput of the first phase."""

    fractions: tuple[float, ...]
    of: str  # a key of RATE_BASES


@dataclass(frozen=True)
class Arm:
    """One configuration of a study: a server with its knobs, and how it is reached."""

    id: str
    label: str
    server: str
    knobs: dict[str, int]
    settings: dict[str, object]  # overrides of the study's [run] table
    load: str | None = None  # a load tool of its own (e.g. "oha"); None: the study's (wrk)
    rates: tuple[int, ...] = ()  # fixed offered requests/s (an open-loop load)
    rates_from: RatesFrom | None = None  # offered requests/s derived from the first phase
    from_best: str | None = None  # a group: run with its best arm's knobs (second phase)
    # make tune's search before the first phase: knob -> values, True (the server.toml's
    # space) or None (not tuned); its answer's knobs are the arm's (bench.studies.tuning)
    tune: dict[str, tuple[str, ...]] | bool | None = None

    @property
    def open_loop(self) -> bool:
        """Loaded at fixed arrival rates rather than by connections that wait for answers."""
        return bool(self.rates or self.rates_from)

    @property
    def derived(self) -> bool:
        """Runs in the second phase: its rates or knobs come from the first phase's records."""
        return self.rates_from is not None or self.from_best is not None


@dataclass(frozen=True)
class Study:
    """A study file, validated."""

    name: str
    title: str
    source: str
    claim: str
    differs: str
    run: dict[str, object]
    arms: tuple[Arm, ...]
    published: tuple[dict, ...]
    metrics: tuple[str, ...]
    checks: tuple[dict, ...]
    plot_metric: str
    best_by: str | None = None  # per group of arms, keep the one with the highest metric
    open_metrics: tuple[str, ...] = ("achieved_rps", "p50_ms", "p99_ms", "failed_pct")
    not_run: tuple[dict, ...] = ()  # {label, published, why, instead}: the source's, not ours
    expect: str | None = None  # what is expected, in prose (a study without checks)
    no_fix: dict[str, str] = field(default_factory=dict)  # server -> why no fix arm
    tune: TuneTable | None = None  # the tuned arms' searches: objective, budget, margin

    @property
    def tuned_arms(self) -> tuple[Arm, ...]:
        """The arms make tune's search configures before the first phase."""
        return tuple(a for a in self.arms if a.tune is not None)

    def settings(self, arm: Arm) -> dict[str, object]:
        """The arm's settings over [run]."""
        return merged_settings(self.run, arm)

    @property
    def judged(self) -> bool:
        """Decided by [[check]] tables (a verdict), not described by `expect`."""
        return bool(self.checks)

    def fails_as_finding(self, arm_id: str) -> bool:
        """Whether a failed run of this arm is what the study measures, not a run gone wrong:
        the arm is a side of a check on a metric counted on failed runs too (ON_FAILED_RUNS:
        container-limits' default worker rule under a memory limit, brought down by the
        kernel's OOM kills, is its finding)."""
        return studyfile.failures_are_findings(self.checks, [arm_id])

    def arm(self, arm_id: str) -> Arm | None:
        """The arm of that id (None: no such arm, e.g. a group's name)."""
        return next((a for a in self.arms if a.id == arm_id), None)

    def is_open(self, name: str) -> bool:
        """Whether an arm id (groups are closed-loop sweeps) names an open-loop arm."""
        arm = self.arm(name)
        return arm is not None and arm.open_loop

    def check_is_open(self, check: dict) -> bool:
        """Whether a check judges open-loop arms (both sides are of one load model)."""
        return self.is_open(str(check["a"]["arm"]))


def merged_settings(run: dict[str, object], arm: Arm) -> dict[str, object]:
    """An arm's settings over [run]; sysctls add up (the arm's win for a name in both)."""
    merged = {**run, **arm.settings}
    if "sysctls" in run or "sysctls" in arm.settings:
        sysctls = dict(run.get("sysctls", {}))  # type: ignore[call-overload]
        merged["sysctls"] = sysctls | dict(arm.settings.get("sysctls", {}))  # type: ignore[call-overload]
    return merged


def in_namespace(settings: dict[str, object]) -> bool:
    """Whether an arm (its merged settings) runs in a network namespace of its own."""
    return bool(settings.get("namespace", False))


def study_names() -> list[str]:
    """Every study file's name."""
    return studyfile.study_names()


def _check_settings(path: Path, where: str, settings: dict) -> None:
    """[run] or an arm's overrides: the static schema (bench.core.studyfile), then a CPU quota
    a cgroup can hold."""
    check_settings(path, where, settings)
    if "cpu_quota" in settings:
        try:
            cgroup.quota_us(settings["cpu_quota"])
        except ValueError as exc:
            raise StudyError(f"{path}: {where}: cpu_quota: {exc}") from None


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def validate_rates_from(where: str, raw: object) -> RatesFrom:
    """rates_from = { fraction = [0.5, 0.8], of = "slowest-best-rps" }."""
    if not isinstance(raw, dict) or set(raw) != {"fraction", "of"}:
        raise StudyError(
            f"{where}: rates_from must be {{ fraction = [0.5, 0.8], of = "
            f"{next(iter(RATE_BASES))!r} }}"
        )
    if raw["of"] not in RATE_BASES:
        raise StudyError(
            f"{where}: rates_from of = {raw['of']!r} is unknown; valid: {', '.join(RATE_BASES)}"
        )
    fractions = raw["fraction"]
    if not (
        isinstance(fractions, list)
        and fractions
        and all(
            isinstance(f, (int, float)) and not isinstance(f, bool) and 0 < f <= FRACTION_MAX
            for f in fractions
        )
        and len(set(fractions)) == len(fractions)
    ):
        raise StudyError(
            f"{where}: rates_from fraction must be a list of distinct numbers in "
            f"(0, {FRACTION_MAX:g}], e.g. [0.5, 0.8]"
        )
    return RatesFrom(tuple(float(f) for f in fractions), str(raw["of"]))


def validate_load_keys(where: str, raw: dict) -> dict[str, object]:
    """An arm's load, rates, rates_from and from_best: the Arm fields they become."""
    load = raw.get("load")
    if load is not None and load not in kinds():
        raise StudyError(f"{where}: unknown load {load!r}; valid: {', '.join(kinds())}")
    open_tools = [name for name, tool in tools().items() if tool.open_loop]
    rates, rates_from = raw.get("rates"), raw.get("rates_from")
    if load in open_tools and (rates is None) == (rates_from is None):
        raise StudyError(
            f"{where}: load = {load!r} sends a fixed arrival rate: give either rates = "
            "[req/s, ...] or rates_from = { fraction = [...], of = ... }"
        )
    if load not in open_tools and (rates is not None or rates_from is not None):
        raise StudyError(
            f"{where}: rates and rates_from need an open-loop load: load = "
            f"{' or '.join(repr(t) for t in open_tools)}"
        )
    if rates is not None and not (
        isinstance(rates, list) and rates and all(_whole(r) and 0 < r <= RATE_MAX for r in rates)
    ):
        raise StudyError(f"{where}: rates must be a list of whole requests/s in 1..{RATE_MAX:,}")
    from_best = raw.get("from_best")
    if from_best is not None and not isinstance(from_best, str):
        raise StudyError(f"{where}: from_best must be a group's name (a string)")
    if from_best is not None and "knobs" in raw:
        raise StudyError(f"{where}: from_best takes the group's best knobs: drop knobs")
    if (rates or rates_from) and "group" in raw:
        raise StudyError(f"{where}: an open-loop arm is in no group (groups are sweeps)")
    return {
        "load": load,
        "rates": tuple(rates or ()),
        "rates_from": validate_rates_from(where, rates_from) if rates_from is not None else None,
        "from_best": from_best,
    }


def _arm(path: Path, raw: object) -> Arm:
    if not (isinstance(raw, dict) and isinstance(raw.get("id"), str)):
        raise StudyError(f"{path}: every [[arm]] needs an id = '...'")
    if not isinstance(raw.get("server"), str):
        raise StudyError(f"{path}: arm {raw['id']} needs a server = '<server id>'")
    if not isinstance(raw.get("knobs", {}), dict):
        raise StudyError(f"{path}: arm {raw['id']}: knobs must be a table")
    settings = {k: v for k, v in raw.items() if k not in ARM_OWN_KEYS}
    _check_settings(path, f"arm {raw['id']}", settings)
    load_keys = validate_load_keys(f"{path}: arm {raw['id']}", raw)
    try:
        resolve_knob_expressions(raw.get("knobs", {}), 1)  # evaluated again per machine
    except StudyError as exc:
        raise StudyError(f"{path}: arm {raw['id']}: {exc}") from None
    return Arm(
        id=raw["id"],
        label=str(raw.get("label", raw["id"])),
        server=raw["server"],
        knobs=dict(raw.get("knobs", {})),
        settings=settings,
        tune=arm_space(f"{path}: arm {raw['id']}", raw.get("tune")),
        **load_keys,  # type: ignore[arg-type]
    )


def _check_arm_run(path: Path, run: dict, arm: Arm) -> None:
    """An arm's settings over [run]: a duration, and scenarios the harness or paths name,
    which the arm's load tool can drive."""
    settings = merged_settings(run, arm)
    _check_namespace(f"{path}: arm {arm.id}", arm, settings)
    check_runtime(f"{path}: arm {arm.id}", settings)
    check_protocol(f"{path}: arm {arm.id}", arm, settings)
    check_python(f"{path}: arm {arm.id}", arm, settings)
    if arm.tune is not None:
        check_arm_shape(f"{path}: arm {arm.id}", settings, arm.derived, arm.open_loop)
    if "duration" not in settings and arm.load != RACE_LOAD:
        raise StudyError(f"{path}: arm {arm.id} has no duration (in [run] or the arm)")
    # A scenario of the harness, or a name the study gives a path (paths = { sleep = ... }).
    scenarios = settings.get("scenarios", [settings.get("scenario", defaults.STUDY_SCENARIO)])
    named = set(plan.SCENARIOS) | set(settings.get("paths", {}))
    named |= {scenarios[0]} if scenarios and "path" in settings else set()
    unknown = [s for s in scenarios if s not in named]
    if unknown or not scenarios:
        raise StudyError(
            f"{path}: arm {arm.id}: unknown scenario {unknown or scenarios!r}; valid: "
            f"{', '.join(plan.SCENARIOS)} or a name in paths"
        )
    load = arm.load or default_name()
    if load == RACE_LOAD:
        return  # the race sends plain GETs: any single-URL route
    drivable = scenarios_for(load)
    wrong = [s for s in scenarios if s in plan.SCENARIOS and s not in drivable]
    if wrong:
        raise StudyError(
            f"{path}: arm {arm.id}: load {load!r} cannot drive {wrong}; valid: "
            f"{', '.join(drivable)}"
        )


def _check_namespace(where: str, arm: Arm, settings: dict[str, object]) -> None:
    """An arm in a namespace: oha at one rate or the race, one route and connection count,
    net.* sysctls; the namespace's keys nowhere else."""
    used = [k for k in ("sysctls", *RACE_KEYS) if k in settings]
    if not in_namespace(settings):
        if used or arm.load == RACE_LOAD:
            raise StudyError(f"{where}: {used or ['load = race']} need namespace = true")
        return
    if arm.load not in NAMESPACE_LOADS or arm.derived:
        raise StudyError(
            f"{where}: an arm in a namespace is loaded by load = {' or '.join(NAMESPACE_LOADS)}"
        )
    if arm.load == open_loop_name() and len(arm.rates) != 1:
        raise StudyError(f"{where}: an arm in a namespace runs oha at one rate: rates = [req/s]")
    if arm.load == open_loop_name() and set(used) & set(RACE_KEYS):
        raise StudyError(f"{where}: {sorted(set(used) & set(RACE_KEYS))} need load = 'race'")
    unsupported = [k for k in NOT_IN_NAMESPACE if k in settings]
    if unsupported or len(settings.get("concurrency", [1])) != 1:  # type: ignore[arg-type]
        raise StudyError(
            f"{where}: an arm in a namespace takes one concurrency and none of {unsupported}"
        )
    sysctls = settings.get("sysctls", {})
    if not all(str(k).startswith("net.") for k in sysctls):  # type: ignore[union-attr]
        raise StudyError(f"{where}: sysctls may set net.* names only (the namespace's own)")


def check_python(where: str, arm: Arm, settings: dict[str, object]) -> None:
    """python of an arm: a name PYTHON= takes, which the arm's server declares, for a server
    started here natively or in its image on it (runtime = 'docker'), not in a namespace."""
    if "python" not in settings:
        return
    try:
        name = parse_python(str(settings["python"]))
    except validate.UsageError as exc:
        raise StudyError(f"{where}: python: {exc}") from None
    refusal = python_refusal(load_all(), [arm.server], name)
    if refusal is None and in_namespace(settings):
        refusal = "an arm in a namespace runs the server's usual venv"
    if refusal is not None:
        raise StudyError(f"{where}: python = {name!r}: {refusal}")


def check_protocol(where: str, arm: Arm, settings: dict[str, object]) -> None:
    """protocol and streams of an arm: a known protocol its server declares and its load tool
    speaks; streams only over HTTP/2; not in a namespace, a container or behind a proxy."""
    name = str(settings.get("protocol", HTTP1))
    if name not in PROTOCOLS:
        raise StudyError(f"{where}: protocol = {name!r} is unknown; valid: {', '.join(PROTOCOLS)}")
    if int(settings.get("streams", 1)) != 1 and not PROTOCOLS[name].http2:  # type: ignore[call-overload]
        raise StudyError(f"{where}: streams are HTTP/2's: protocol = 'h2c' or 'h2'")
    if name == HTTP1:
        return
    refusal = protocol_refusal(load_all(), [arm.server], name)
    load = arm.load or default_name()
    if refusal is None and name not in kinds()[load].protocols:
        refusal = f"load {load!r} does not speak {name}"
    if refusal is None and (in_namespace(settings) or settings.get("proxy", "none") != "none"):
        refusal = "it is spoken between the load tool and a server started here, directly"
    if refusal is None and settings.get("runtime", defaults.RUNTIME) != "native":
        refusal = "it is declared for a server started natively"
    if refusal is not None:
        raise StudyError(f"{where}: protocol = {name!r}: {refusal}")


def check_runtime(where: str, settings: dict[str, object]) -> None:
    """runtime, cpus and memory of an arm (its merged settings): a known runtime; the limits
    in docker's syntax and only with runtime = "docker", which takes no native-only key."""
    runtime = settings.get("runtime", defaults.RUNTIME)
    if runtime not in STUDY_RUNTIMES:
        raise StudyError(
            f"{where}: runtime = {runtime!r} is unknown; valid: {', '.join(STUDY_RUNTIMES)}"
        )
    limits = [k for k in CONTAINER_KEYS if k in settings]
    if runtime != "docker":
        if limits:
            raise StudyError(f"{where}: {limits} limit a container: add runtime = 'docker'")
        return
    native = [k for k in NOT_IN_CONTAINER if k in settings]
    if native:
        raise StudyError(
            f"{where}: {native} are not supported with runtime = 'docker' (its CPU limit is cpus)"
        )
    available = os.cpu_count() or 1
    try:
        if "cpus" in settings:
            validate.parse_cpus(str(settings["cpus"]), available)
        if "memory" in settings:
            validate.parse_memory(str(settings["memory"]))
    except ValueError as exc:
        raise StudyError(
            f"{where}: {exc}; valid: cpus = {validate.CPUS_MIN:g}..{available} (e.g. 0.5), "
            "memory = a size of at least 6m (e.g. '512m')"
        ) from None


def _check_derived(path: Path, arms: tuple[Arm, ...], best_by: str | None) -> None:
    """from_best names a sweep's group of the same server; both keys need best_by."""
    groups: dict[str, set[str]] = defaultdict(set)
    for arm in arms:
        if "group" in arm.settings:
            groups[str(arm.settings["group"])].add(arm.server)
    for arm in arms:
        if arm.derived and not best_by:
            raise StudyError(
                f"{path}: arm {arm.id}: rates_from and from_best need best_by = 'rps' "
                "(what picks each group's best arm)"
            )
        if arm.rates_from is not None and not groups:
            raise StudyError(f"{path}: arm {arm.id}: rates_from needs arms with a group")
        if arm.from_best is None:
            continue
        if arm.from_best not in groups:
            raise StudyError(
                f"{path}: arm {arm.id}: from_best names unknown group {arm.from_best!r}; "
                f"valid: {', '.join(groups) or 'none (no arm has a group)'}"
            )
        if groups[arm.from_best] != {arm.server}:
            raise StudyError(
                f"{path}: arm {arm.id}: from_best group {arm.from_best!r} runs "
                f"{sorted(groups[arm.from_best])}, not {arm.server!r}"
            )


def _study_arms(path: Path, data: dict) -> tuple[Arm, ...]:
    """Every [[arm]], validated: at least one, unique ids, each runnable with [run]."""
    arms = tuple(_arm(path, raw) for raw in data["arm"])
    if not arms:
        raise StudyError(f"{path}: no [[arm]]")
    ids = [a.id for a in arms]
    if len(set(ids)) != len(ids):
        raise StudyError(f"{path}: arm ids must be unique")
    for arm in arms:
        _check_arm_run(path, data["run"], arm)
    _check_derived(path, arms, data.get("best_by"))
    return arms


def _check_side(path: Path, check: dict, side: str, arms: dict[str, Arm], names: list) -> None:
    """One side of a check: a known arm or group, known keys, a fraction its arm runs at."""
    raw = check.get(side)
    if not isinstance(raw, dict) or raw.get("arm") not in names:
        arm = raw.get("arm") if isinstance(raw, dict) else None
        raise StudyError(f"{path}: check {side} = {{ arm = ... }} names unknown arm {arm!r}")
    unknown = set(raw) - set(SIDE_KEYS)
    if unknown:
        raise StudyError(
            f"{path}: check {side} has unknown keys {sorted(unknown)}; valid: "
            f"{', '.join(SIDE_KEYS)}"
        )
    if "fraction" not in raw:
        return
    arm = arms.get(raw["arm"])
    valid = arm.rates_from.fractions if arm and arm.rates_from else ()
    if raw["fraction"] not in valid:
        raise StudyError(
            f"{path}: check {side}: fraction = {raw['fraction']!r} is not one arm "
            f"{raw['arm']} runs at; valid: {', '.join(f'{f:g}' for f in valid) or 'none'}"
        )


def _check_rejudges(path: Path, checks: list, is_open: Callable[[dict], bool]) -> None:
    """Check ids are unique; `rejudges` names a check of the other load model."""
    ids = [c["id"] for c in checks if "id" in c]
    if not all(isinstance(i, str) for i in ids) or len(set(ids)) != len(ids):
        raise StudyError(f"{path}: check ids must be unique strings")
    by_id = {c["id"]: c for c in checks if "id" in c}
    for check in checks:
        if "rejudges" not in check:
            continue
        other = by_id.get(check["rejudges"])
        if other is None or is_open(other) == is_open(check):
            raise StudyError(
                f"{path}: check rejudges = {check['rejudges']!r} must name the id of a check "
                "of the other load model"
            )


def _check_checks(
    path: Path, checks: list, metrics: tuple[str, ...], names: list[str], arms: tuple[Arm, ...]
) -> None:
    """The [[check]] tables: known metrics and kinds, sides naming an arm or a group of one
    load model, and ids that `rejudges` may name."""
    if not all(isinstance(c, dict) for c in checks):
        raise StudyError(f"{path}: `check` must be one or more [[check]] tables")
    for metric in (*metrics, *(c.get("metric") for c in checks)):
        if metric not in METRICS:
            raise StudyError(f"{path}: unknown metric {metric!r}; valid: {', '.join(METRICS)}")
    by_id = {a.id: a for a in arms}
    tuned = [a.id for a in arms if a.tune is not None]
    for check in checks:
        if check.get("kind") not in ("ratio", "less", "at_most", "tuned"):
            raise StudyError(f"{path}: check kind must be ratio, less, at_most or tuned")
        if check["kind"] == "ratio" and not isinstance(check.get("published"), (int, float)):
            raise StudyError(f"{path}: a ratio check needs published = <the source's ratio>")
        if "margin_pct" in check:
            _check_count_margin(path, check)
        for side in ("a", "b"):
            _check_side(path, check, side, by_id, names)
        if check["kind"] == "tuned":
            check_tuned_check(path, check, tuned)
        models = {
            by_id[check[s]["arm"]].open_loop if check[s]["arm"] in by_id else False
            for s in ("a", "b")
        }
        if len(models) > 1:
            raise StudyError(
                f"{path}: check {check.get('describe', check['metric'])!r} compares a "
                "closed-loop arm with an open-loop one; compare within one load model"
            )

    def is_open(check: dict) -> bool:
        arm = by_id.get(check["a"]["arm"])
        return arm is not None and arm.open_loop

    _check_rejudges(path, checks, is_open)


# Counts out of the arrivals (oom_kills is per trial: no share of arrivals to tolerate)
SHARE_COUNTS = tuple(m for m in COUNT_METRICS if m != "oom_kills")


def _check_count_margin(path: Path, check: dict) -> None:
    """margin_pct: how many % of the arrivals "a at most b" tolerates on a count (a number
    above 0 and below 100), on at_most checks of counts out of the arrivals only."""
    margin = check["margin_pct"]
    where = f"{path}: check {check.get('describe', check.get('metric'))!r}"
    if check.get("kind") != "at_most" or check.get("metric") not in SHARE_COUNTS:
        raise StudyError(f"{where}: margin_pct is for at_most checks of {', '.join(SHARE_COUNTS)}")
    if isinstance(margin, bool) or not isinstance(margin, (int, float)) or not 0 < margin < 100:
        raise StudyError(f"{where}: margin_pct must be a number above 0 and below 100")


def load_study(name: str) -> Study:
    """Read and validate studies/<name>.toml; StudyError names the file and the key."""
    path = studyfile.study_path(name)
    data = read_study(path)
    _check_settings(path, "[run]", data["run"])
    arms = _study_arms(path, data)
    names = [a.id for a in arms]
    names += [str(a.settings["group"]) for a in arms if "group" in a.settings]
    metrics = tuple(data.get("metrics", ["rps", "p99_ms"]))
    open_metrics = tuple(data.get("open_metrics", Study.open_metrics))
    if "check" in data and not data["check"]:
        raise StudyError(f"{path}: `check` must be one or more [[check]] tables")
    _check_checks(path, data.get("check", []), (*metrics, *open_metrics), names, arms)
    _check_figures(path, data)
    return Study(
        name=name,
        title=data["title"],
        source=data["source"],
        claim=data["claim"].strip(),
        differs=data["differs"].strip(),
        run=dict(data["run"]),
        arms=arms,
        published=tuple(data.get("published", [])),
        metrics=metrics,
        checks=tuple(data.get("check", ())),
        plot_metric=data.get("plot_metric", metrics[0]),
        best_by=data.get("best_by"),
        open_metrics=open_metrics,
        not_run=tuple(data.get("not_run", [])),
        expect=data["expect"].strip() if "expect" in data else None,
        no_fix=_no_fix(path, data.get("no_fix", {}), arms),
        tune=tune_table(path, data.get("tune"), [a.id for a in arms if a.tune is not None]),
    )


def _no_fix(path: Path, table: dict, arms: tuple[Arm, ...]) -> dict[str, str]:
    """`no_fix`: a server of the study's arms -> why it has no fix arm, in prose."""
    servers = sorted({a.server for a in arms})
    for server, why in table.items():
        if server not in servers or not isinstance(why, str):
            raise StudyError(
                f"{path}: no_fix.{server} must be a server of the arms ({', '.join(servers)}) "
                "= why it has no fix arm"
            )
    return {server: " ".join(why.split()) for server, why in table.items()}


def _check_figures(path: Path, data: dict) -> None:
    """`published` (the source's figures) and `not_run` (what the source ran and we cannot)."""
    if not all(isinstance(fig, dict) for fig in data.get("published", [])):
        raise StudyError(f"{path}: `published` must be a list of {{ arm, metric, value }} tables")
    for entry in data.get("not_run", []):
        if not isinstance(entry, dict) or not all(
            isinstance(entry.get(k), str) for k in NOT_RUN_KEYS
        ):
            raise StudyError(
                f"{path}: each `not_run` entry needs the strings {', '.join(NOT_RUN_KEYS)}"
            )


_EXPRESSION = re.compile(r"^[0-9+*() ]*(cpus|workers|quota)?[0-9+*() ]*$")


def resolve_knob_expressions(
    knobs: dict[str, object], cpus: int, quota: float | None = None
) -> dict[str, int]:
    """Knob values as written in study files: numbers, or rules such as "2*cpus+1" (Gunicorn's
    documented default) and "2*workers", evaluated for this machine. `cpus` is what
    os.cpu_count() sees (a container's quota is not among it); `quota` is the arm's CPU quota
    rounded up to whole CPUs, at least 1 (the cgroup-aware count; `cpus` without a quota)."""
    values: dict[str, int] = {}
    for name in sorted(knobs, key=lambda n: n != "workers"):  # workers first
        raw = knobs[name]
        if isinstance(raw, int):
            values[name] = raw
            continue
        text = str(raw).replace(" ", "")
        if not _EXPRESSION.match(text):
            raise StudyError(f"knob {name} = {raw!r}: only numbers, cpus, quota, workers, + and *")
        whole_quota = max(1, math.ceil(quota)) if quota is not None else cpus
        names = {"cpus": cpus, "workers": values.get("workers", cpus), "quota": whole_quota}
        # Safe: the pattern above admits only digits, + * ( ) and one of the two names.
        values[name] = int(eval(text, {"__builtins__": {}}, names))
    return values


def load_runnable(names: list[str]) -> list[Study]:
    """The named studies, validated, every arm naming a server of the registry."""
    studies = [load_study(n) for n in names]
    load_all()  # a broken server declaration is bad input too: refuse before anything runs
    known = server_ids()
    for study in studies:
        for arm in study.arms:
            where = f"{studyfile.study_path(study.name)}: arm {arm.id}"
            if arm.server not in known:
                raise StudyError(
                    f"{where} names unknown server {arm.server!r}; valid: {', '.join(known)}"
                )
            if arm.tune is not None:
                check_arm_space(where, arm.tune, load_all()[arm.server], arm.knobs)
    return studies
