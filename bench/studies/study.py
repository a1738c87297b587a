"""Studies: the source documents' experiments as data, run by the harness, judged by a rule.

Input: studies/<name>.toml (arms = servers with knobs, routes, concurrency, proxy,
keep-alive; the published figures with their source; the checks that decide the verdict).
Output: one harness run per study (its records carry metadata.study), and for summary.md
one section per study: the claim, the published figures beside ours in the same units, a
verdict (`reproduced`, `partly reproduced`, `not reproduced`) decided by the file's checks on
ratios measured in one run, a sentence on why it may differ, and a plot.

A study may run in two phases inside one `make study`: first its arms that need nothing
measured (the closed-loop sweep, fixed-rate arms), then the arms derived from those records
(`rates_from`: offered rates as fractions of a measured throughput; `from_best`: a group's
best arm's knobs). Arms with a load tool of their own (`load = "oha"`) are judged as a load
model of their own: the section gives a verdict per load model and says whether it changed.
"""

from __future__ import annotations

import math
import os
import re
import statistics
import sys
import time
import tomllib
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from bench.core import defaults, plan
from bench.core.outcome import Outcome as RunOutcome
from bench.core.record import Record, load_records
from bench.core.registry import server_ids
from bench.host import cgroup
from bench.load import default_name, scenarios_for, tools
from bench.load import names as load_names
from bench.report.cells import host_of
from bench.report.table import markdown_table

STUDIES_DIR = Path(__file__).resolve().parents[2] / "studies"
SEEDS_URL = "../shared/seeds"
METRICS = {
    "rps": "req/s",
    "mean_s": "mean response s",
    "mean_ms": "mean ms",
    "p50_ms": "p50 ms",
    "p90_ms": "p90 ms",
    "p99_ms": "p99 ms",
    "p999_ms": "p99.9 ms",
    "errors_pct": "errors %",
    "gateway_errors_pct": "502+504 %",
    "s502": "502s",
    "s504": "504s",
    "overflows": "listen overflows",
    "time_wait": "TIME_WAIT",
    "time_wait_db": "TIME_WAIT at pgbouncer",
    "server_cpu_pct": "server CPU %",
    # open loop (records with offered_rps)
    "offered_rps": "offered req/s",
    "achieved_rps": "achieved req/s",
    "failed_pct": "failed %",
    # CPU_QUOTA= / cpu_quota (records with a cgroup): cpu.stat over the measured window
    "throttled_ms": "throttled ms",
    "throttled_pct": "throttled periods %",
    # LIFECYCLE=reload (records with a lifecycle): what the load saw around the reload
    "reload_failed": "failed on reload",
    "p99_around_ms": "p99 ms ±2 s of reload",
    "recovery_s": "recovery s",
    # RECYCLE= (records with recycles)
    "workers_started": "workers started",
}


# What [run] or an arm may set besides id, label, server, knobs -> the TOML type it must have.
SETTING_TYPES: dict[str, type] = {
    "group": str,
    "proxy": str,
    "keepalive": bool,
    "upstream_keepalive": bool,
    "proxy_timeout": int,
    "app_env": dict,
    "path": str,
    "paths": dict,
    "scenario": str,
    "scenarios": list,
    "concurrency": list,
    "duration": int,
    "warmup": int,
    "trials": int,
    "load_timeout": int,
    "cpu_quota": float,  # CPUs (1.0, 0.5): the server in a cgroup with this quota (CPU_QUOTA=)
    "lifecycle": str,  # "reload": the server's reload mid-window (LIFECYCLE=)
    "recycle": int,  # requests per worker before the server's own recycling (RECYCLE=)
}
ARM_SETTINGS = set(SETTING_TYPES)
# Keys only an arm may set: a load tool of its own, its offered rates, and what it takes from
# the first phase's records. [run] is the closed-loop setting the other arms share.
OPEN_LOOP_KEYS = ("load", "rates", "rates_from", "from_best")
# rates_from's `of`: the throughput, measured in the first phase, the rates are fractions of.
RATE_BASES = {
    "slowest-best-rps": "the lowest, over groups, of the req/s of each group's best arm",
}
RATE_MAX = 1_000_000  # as RATE= (bench.cli.LIMITS)
FRACTION_MAX = 2.0  # past 2× a measured capacity the answer is only errors
# What a check's side may name: an arm (or group), narrowed to a concurrency, a scenario, or
# (an arm with rates_from) one of its fractions.
SIDE_KEYS = ("arm", "concurrency", "scenario", "fraction")
# Top-level keys -> (their TOML type, required).
TOP_TYPES: dict[str, tuple[type, bool]] = {
    "title": (str, True),
    "source": (str, True),
    "claim": (str, True),
    "differs": (str, True),
    "run": (dict, True),
    "arm": (list, True),
    "check": (list, True),
    "published": (list, False),
    "metrics": (list, False),
    "plot_metric": (str, False),
    "best_by": (str, False),
    "open_metrics": (list, False),
    "not_run": (list, False),
}
# A configuration the source measured that cannot run today: shown as a row of its own.
NOT_RUN_KEYS = ("label", "published", "why", "instead")
_TYPE_NAMES = {str: "a string", dict: "a table", list: "a list", int: "a whole number"}
_TYPE_NAMES[bool] = "true or false"
_TYPE_NAMES[float] = "a number of CPUs with a decimal point (1.0)"


class StudyError(ValueError):
    """A study file that does not say what the harness needs."""


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


def study_names() -> list[str]:
    """Every study file's name."""
    return sorted(p.stem for p in STUDIES_DIR.glob("*.toml"))


def _type_name(kind: type) -> str:
    return _TYPE_NAMES.get(kind, kind.__name__)


def _check_settings(path: Path, where: str, settings: dict) -> None:
    """[run] or an arm's overrides: known keys with the right types."""
    misplaced = set(settings) & set(OPEN_LOOP_KEYS)
    if misplaced:
        raise StudyError(f"{path}: {where}: {sorted(misplaced)} belong to an [[arm]]")
    unknown = set(settings) - ARM_SETTINGS
    if unknown:
        raise StudyError(f"{path}: {where} has unknown keys {sorted(unknown)}")
    for key, value in settings.items():
        kind = SETTING_TYPES[key]
        # bool is an int in Python; a TOML true is not a number of seconds
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise StudyError(f"{path}: {where}: {key} must be {_type_name(kind)}")
    if not all(isinstance(c, int) and c > 0 for c in settings.get("concurrency", [1])):
        raise StudyError(f"{path}: {where}: concurrency must be a list of positive numbers")
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
    if load is not None and load not in load_names():
        raise StudyError(f"{where}: unknown load {load!r}; valid: {', '.join(load_names())}")
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
    fixed = ("id", "label", "server", "knobs", *OPEN_LOOP_KEYS)
    settings = {k: v for k, v in raw.items() if k not in fixed}
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
        **load_keys,  # type: ignore[arg-type]
    )


def _read_study(path: Path) -> dict:
    """The study file parsed, its top-level keys present where required and of their type."""
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise StudyError(f"{path}: {exc}") from exc
    for key, (kind, required) in TOP_TYPES.items():
        if key not in data:
            if required:
                raise StudyError(f"{path}: missing `{key}`")
        elif not isinstance(data[key], kind):
            raise StudyError(f"{path}: `{key}` must be {_type_name(kind)}")
    return data


def _check_arm_run(path: Path, run: dict, arm: Arm) -> None:
    """An arm's settings over [run]: a duration, and scenarios the harness or paths name,
    which the arm's load tool can drive."""
    settings = {**run, **arm.settings}
    if "duration" not in settings:
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
    drivable = scenarios_for(load)
    wrong = [s for s in scenarios if s in plan.SCENARIOS and s not in drivable]
    if wrong:
        raise StudyError(
            f"{path}: arm {arm.id}: load {load!r} cannot drive {wrong}; valid: "
            f"{', '.join(drivable)}"
        )


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
    if not checks or not all(isinstance(c, dict) for c in checks):
        raise StudyError(f"{path}: `check` must be one or more [[check]] tables")
    for metric in (*metrics, *(c.get("metric") for c in checks)):
        if metric not in METRICS:
            raise StudyError(f"{path}: unknown metric {metric!r}; valid: {', '.join(METRICS)}")
    by_id = {a.id: a for a in arms}
    for check in checks:
        if check.get("kind") not in ("ratio", "less", "at_most"):
            raise StudyError(f"{path}: check kind must be ratio, less or at_most")
        if check["kind"] == "ratio" and not isinstance(check.get("published"), (int, float)):
            raise StudyError(f"{path}: a ratio check needs published = <the source's ratio>")
        for side in ("a", "b"):
            _check_side(path, check, side, by_id, names)
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


def load_study(name: str) -> Study:
    """Read and validate studies/<name>.toml; StudyError names the file and the key."""
    path = STUDIES_DIR / f"{name}.toml"
    data = _read_study(path)
    _check_settings(path, "[run]", data["run"])
    arms = _study_arms(path, data)
    names = [a.id for a in arms]
    names += [str(a.settings["group"]) for a in arms if "group" in a.settings]
    metrics = tuple(data.get("metrics", ["rps", "p99_ms"]))
    open_metrics = tuple(data.get("open_metrics", Study.open_metrics))
    _check_checks(path, data["check"], (*metrics, *open_metrics), names, arms)
    if not all(isinstance(fig, dict) for fig in data.get("published", [])):
        raise StudyError(f"{path}: `published` must be a list of {{ arm, metric, value }} tables")
    for entry in data.get("not_run", []):
        if not isinstance(entry, dict) or not all(
            isinstance(entry.get(k), str) for k in NOT_RUN_KEYS
        ):
            raise StudyError(
                f"{path}: each `not_run` entry needs the strings {', '.join(NOT_RUN_KEYS)}"
            )
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
        checks=tuple(data["check"]),
        plot_metric=data.get("plot_metric", metrics[0]),
        best_by=data.get("best_by"),
        open_metrics=open_metrics,
        not_run=tuple(data.get("not_run", [])),
    )


def arm_options(
    study: Study,
    arm: Arm,
    base: plan.Options,
    run_id: str,
    duration: int | None = None,
    derived: Derived | None = None,
) -> plan.Options:
    """The harness options of one arm: the study's [run] table, the arm's overrides, what the
    first phase measured (`derived`: rates and knobs of a second-phase arm), and what the
    user set (DURATION, RESULTS) on top."""
    if arm.derived and derived is None:
        raise ValueError(f"arm {arm.id} runs in the second phase: give what the first measured")
    settings = {**study.run, **arm.settings}
    scenarios = tuple(
        settings.get("scenarios", [settings.get("scenario", defaults.STUDY_SCENARIO)])
    )
    paths = dict(settings.get("paths", {}))
    if "path" in settings:
        paths[scenarios[0]] = str(settings["path"])
    proxy = settings.get("proxy", defaults.PROXY)
    keepalive = bool(settings.get("keepalive", defaults.KEEPALIVE))
    upstream = settings.get("upstream_keepalive", keepalive)
    if arm.open_loop:
        # [run]'s concurrency is the closed-loop arms' connections; an open-loop arm's pool is
        # its own, or (none given) sized per rate by plan.pool_for.
        concurrency = tuple(arm.settings.get("concurrency", ()))
    else:
        concurrency = tuple(settings.get("concurrency", defaults.STUDY_CONCURRENCY))
    cpus = len(os.sched_getaffinity(0))
    knobs = derived.knobs if derived and derived.knobs is not None else arm.knobs
    quota = settings.get("cpu_quota")
    return replace(
        base,
        servers=(arm.server,),
        scenarios=scenarios,
        concurrency=concurrency,
        duration_s=duration if duration is not None else int(settings["duration"]),
        warmup_s=int(settings.get("warmup", defaults.STUDY_WARMUP_S)),
        trials=int(settings.get("trials", defaults.STUDY_TRIALS)),
        overrides=resolve_knob_expressions(knobs, cpus, quota),  # type: ignore[arg-type]
        cpu_quota=float(quota) if quota is not None else None,  # type: ignore[arg-type]
        lifecycle=str(settings["lifecycle"]) if "lifecycle" in settings else None,
        recycle=int(settings["recycle"]) if "recycle" in settings else None,  # type: ignore[call-overload]
        proxy=None if proxy == "none" else str(proxy),
        keepalive=keepalive,
        upstream_keepalive=None if proxy == "none" else bool(upstream),
        proxy_timeout_s=int(settings.get("proxy_timeout", defaults.PROXY_TIMEOUT_S)),
        paths=paths,
        app_env={k: str(v) for k, v in dict(settings.get("app_env", {})).items()},
        load_timeout_s=int(settings.get("load_timeout", defaults.LOAD_TIMEOUT_S)),
        load_tool=arm.load or base.load_tool,
        rates=tuple(derived.rates.values()) if derived and derived.rates else arm.rates,
        meta={
            "study": study.name,
            "study_arm": arm.id,
            "study_run": run_id,
            **({"workers_rule": str(knobs["workers"])} if "workers" in knobs else {}),
            **(derived.meta() if derived else {}),
        },
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
    known = server_ids()
    for study in studies:
        for arm in study.arms:
            if arm.server not in known:
                raise StudyError(
                    f"{STUDIES_DIR / study.name}.toml: arm {arm.id} names unknown server "
                    f"{arm.server!r}; valid: {', '.join(known)}"
                )
    return studies


def new_run_id() -> str:
    """The id every record of one `make study` carries (metadata.study_run)."""
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())


def study_options(
    names: list[str], base: plan.Options, duration: int | None = None, run_id: str | None = None
) -> list[plan.Options]:
    """Options for every first-phase arm of every named study, in order (StudyError: a file
    is unusable). Second-phase arms need these arms' records: see derived_options."""
    run_id = run_id or new_run_id()
    return [
        arm_options(s, arm, base, run_id, duration)
        for s in load_runnable(names)
        for arm in s.arms
        if not arm.derived
    ]


# -- the second phase: rates and knobs from the first phase's records -------------------------


@dataclass(frozen=True)
class Best:
    """A group's best arm (by the study's best_by) and that arm's req/s."""

    group: str
    arm: str
    value: float
    rps: float | None


@dataclass(frozen=True)
class RateBasis:
    """What rates_from's fractions multiply: a measured req/s, and whose it is."""

    of: str
    group: str
    arm: str
    rps: float

    def rates(self, fractions: tuple[float, ...]) -> dict[str, int]:
        """fraction (as written, e.g. "0.8") -> offered requests/s, whole and at least 1."""
        return {f"{f:g}": max(1, round(f * self.rps)) for f in fractions}


@dataclass(frozen=True)
class Derived:
    """What a second-phase arm takes from the first phase: its rates, its knobs."""

    rates: dict[str, int] | None = None  # fraction -> req/s (rates_from)
    basis: RateBasis | None = None
    knobs: dict[str, object] | None = None  # the best arm's knobs as written (from_best)
    knobs_from: str | None = None  # that arm's id

    def meta(self) -> dict[str, object]:
        """Into every record's metadata: how its rate and knobs were measured."""
        meta: dict[str, object] = {}
        if self.rates and self.basis:
            meta["study_rates"] = dict(self.rates)
            meta["study_rate_basis"] = {
                "of": self.basis.of,
                "group": self.basis.group,
                "arm": self.basis.arm,
                "rps": self.basis.rps,
            }
        if self.knobs_from:
            meta["study_knobs_from"] = self.knobs_from
        return meta


def best_arms(study: Study, records: list[Record]) -> dict[str, Best]:
    """Per group of arms (a server's sweep), the arm with the highest best_by; groups whose
    every arm failed are absent."""
    if not study.best_by:
        return {}
    values = _per_arm(records, study.best_by)
    rps = _per_arm(records, "rps")
    best: dict[str, Best] = {}
    for arm in study.arms:
        group, value = arm.settings.get("group"), values.get(arm.id)
        if group is None or value is None:
            continue
        if str(group) not in best or value > best[str(group)].value:
            best[str(group)] = Best(str(group), arm.id, value, rps.get(arm.id))
    return best


def _per_arm(records: list[Record], metric: str) -> dict[str, float | None]:
    """Median over an arm's cells of a metric (None: the arm has no measured cell)."""
    by_arm: dict[str, list[float]] = defaultdict(list)
    seen = set()
    for (arm, _, _, _), value in measured(records, metric).items():
        seen.add(arm)
        if value is not None:
            by_arm[arm].append(value)
    return {a: statistics.median(by_arm[a]) if by_arm[a] else None for a in seen}


def rate_basis(study: Study, records: list[Record], of: str) -> RateBasis:
    """The throughput rates_from's fractions multiply (RATE_BASES[of]), from the first
    phase's records; StudyError when no group was measured."""
    measured_best = [b for b in best_arms(study, records).values() if b.rps]
    if not measured_best:
        raise StudyError(
            f"study {study.name}: no arm of a group was measured, so the open-loop rates "
            "cannot be derived"
        )
    slowest = min(measured_best, key=lambda b: b.rps or 0.0)
    return RateBasis(of, slowest.group, slowest.arm, float(slowest.rps or 0.0))


def derived_options(
    study: Study,
    records: list[Record],
    base: plan.Options,
    run_id: str,
    duration: int | None = None,
) -> tuple[list[plan.Options], list[str]]:
    """Options of the second-phase arms from the first phase's records, and a line per arm
    that cannot run (its group has no measured arm)."""
    best = best_arms(study, records)
    options, skipped = [], []
    bases: dict[str, RateBasis] = {}
    for arm in study.arms:
        if not arm.derived:
            continue
        rates = basis = None
        if arm.rates_from is not None:
            try:
                basis = bases.setdefault(
                    arm.rates_from.of, rate_basis(study, records, arm.rates_from.of)
                )
            except StudyError as exc:
                skipped.append(f"arm {arm.id} not run: {exc}")
                continue
            rates = basis.rates(arm.rates_from.fractions)
        knobs = knobs_from = None
        if arm.from_best is not None:
            if arm.from_best not in best:
                skipped.append(
                    f"arm {arm.id} not run: no arm of group {arm.from_best} was measured"
                )
                continue
            knobs_from = best[arm.from_best].arm
            knobs = next(a.knobs for a in study.arms if a.id == knobs_from)
        derived = Derived(rates, basis, knobs, knobs_from)
        options.append(arm_options(study, arm, base, run_id, duration, derived))
    return options, skipped


def _by_load_tool(options: list[plan.Options]) -> list[list[plan.Options]]:
    """Consecutive batches of one load tool each (one harness run drives one tool)."""
    batches: list[list[plan.Options]] = []
    for opts in options:
        if batches and batches[-1][0].load_tool == opts.load_tool:
            batches[-1].append(opts)
        else:
            batches.append([opts])
    return batches


Execute = Callable[[Sequence[plan.Options], Callable[[list[Record]], list[str]]], int]


def execute_studies(
    names: list[str],
    base: plan.Options,
    duration: int | None,
    execute: Execute,
    sections: Callable[[list[Record]], list[str]],
) -> int:
    """make study: per study, the first phase, then the arms derived from its records; the
    worst exit status (130: interrupted, nothing more is run)."""
    studies = load_runnable(names)  # every file checked before anything runs
    for study in studies:
        quotas = [a.id for a in study.arms if "cpu_quota" in {**study.run, **a.settings}]
        problem = cgroup.unavailable() if quotas else None
        if problem is not None:
            raise StudyError(f"study {study.name} (cpu_quota): {problem}")
    run_id = new_run_id()
    status = 0
    for study in studies:
        first = [arm_options(study, a, base, run_id, duration) for a in study.arms if not a.derived]
        for phase in (1, 2):
            options = first
            if phase == 2:
                if not any(a.derived for a in study.arms):
                    break
                mine = [
                    r
                    for r in load_records(base.results)[0]
                    if r.metadata.get("study") == study.name
                    and r.metadata.get("study_run") == run_id
                ]
                options, skipped = derived_options(study, mine, base, run_id, duration)
                for line in skipped:
                    print(f"bench: study {study.name}: {line}", file=sys.stderr)
                    status = max(status, 1)
            for batch in _by_load_tool(options):
                status = max(status, execute(batch, sections))
                if status == 130:
                    return status
    return status
    return status


# -- judging and reporting --------------------------------------------------------------------


def metric_value(rec: Record, metric: str) -> float | None:
    """One record's value of a study metric (None: not measured or no sample)."""
    latency = rec.latency_ms or {}
    proxy = (rec.errors or {}).get("proxy_by_status") or {}
    sockets = rec.sockets or {}
    outcome = RunOutcome.of_record(rec)
    attempts = outcome.arrivals
    if metric == "rps":
        return rec.rps
    if metric == "offered_rps":
        return rec.offered_rps
    if metric == "achieved_rps":
        return rec.achieved_rps
    if metric in ("mean_s", "mean_ms"):
        mean = latency.get("mean")
        return None if mean is None else mean / (1000 if metric == "mean_s" else 1)
    if metric in ("p50_ms", "p90_ms", "p99_ms", "p999_ms"):
        return latency.get(metric.removesuffix("_ms"))
    if metric == "errors_pct":
        return 100 * outcome.failed / attempts if attempts else None
    if metric == "failed_pct":
        return outcome.unserved_pct
    if metric == "gateway_errors_pct":
        bad = int(proxy.get("502", 0)) + int(proxy.get("504", 0))
        return 100 * bad / attempts if attempts else None
    if metric in ("s502", "s504"):
        return float(proxy.get(metric[1:], 0))
    if metric == "overflows":
        return sockets.get("listen_overflows")
    if metric == "time_wait":
        return sockets.get("time_wait_max")
    if metric == "time_wait_db":
        return sockets.get("time_wait_db_max")
    if metric == "server_cpu_pct":
        return (rec.resources or {}).get("server_cpu_pct")
    if metric in ("throttled_ms", "throttled_pct"):
        return _throttled(rec, metric)
    if metric == "workers_started":
        value = (rec.recycles or {}).get("workers_started")
        return float(value) if value is not None else None
    if metric in ("reload_failed", "p99_around_ms", "recovery_s"):
        value = (rec.lifecycle or {}).get(metric.removeprefix("reload_"))
        return float(value) if isinstance(value, (int, float)) else None
    raise KeyError(metric)


def _throttled(rec: Record, metric: str) -> float | None:
    """Time throttled, or the share of periods throttled, of a record under a CPU quota."""
    quota = rec.cgroup or {}
    if "nr_periods" not in quota:
        return None
    if metric == "throttled_ms":
        return float(quota["throttled_ms"])
    return 100 * quota["nr_throttled"] / quota["nr_periods"] if quota["nr_periods"] else 0.0


# (arm, scenario, concurrency, offered req/s): offered is None for closed-loop runs.
Cell = tuple[str, str, int, float | None]


def _latest_run(records: list[Record], name: str) -> list[Record]:
    mine = [r for r in records if r.metadata.get("study") == name]
    if not mine:
        return []
    latest = max(str(r.metadata.get("study_run", "")) for r in mine)
    return [r for r in mine if str(r.metadata.get("study_run", "")) == latest]


def measured(records: list[Record], metric: str) -> dict[Cell, float | None]:
    """Median over trials of a metric per (arm, scenario, concurrency, offered rate), ok runs
    only."""
    cells: dict[Cell, list[float]] = defaultdict(list)
    seen: set[Cell] = set()
    for rec in records:
        cell = (str(rec.metadata.get("study_arm")), rec.scenario, rec.concurrency, rec.offered_rps)
        seen.add(cell)
        if rec.status != "ok":
            continue
        value = metric_value(rec, metric)
        if value is not None:
            cells[cell].append(value)
    return {c: statistics.median(cells[c]) if cells[c] else None for c in seen}


def fraction_rates(records: list[Record]) -> dict[tuple[str, str], float]:
    """(arm, fraction as written) -> the offered req/s it was run at (metadata.study_rates)."""
    rates = {}
    for rec in records:
        for fraction, rate in (rec.metadata.get("study_rates") or {}).items():
            rates[(str(rec.metadata.get("study_arm")), str(fraction))] = float(rate)
    return rates


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


def _outcome(check: dict, records: list[Record]) -> Outcome:
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
        line = f"- {what}: {_fmt(a)} vs {_fmt(b)} — {word}"
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


def _verdict(outcomes: list[Outcome]) -> str:
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
    outcomes = [_outcome(c, records) for c in (study.checks if checks is None else checks)]
    return _verdict(outcomes), [o.line for o in outcomes]


def _fmt(value: float | None) -> str:
    if value is None:
        return "–"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:,.2f}"


def _published_cell(study: Study, arm: str, scenario: str, conc: int, metric: str) -> str:
    for fig in study.published:
        if (
            fig.get("arm") == arm
            and fig.get("metric") == metric
            and fig.get("concurrency", conc) == conc
            and fig.get("scenario", scenario) == scenario
        ):
            value = fig.get("value")
            return str(fig.get("text")) if value is None else _fmt(float(value))
    return ""


def collapse_groups(study: Study, records: list[Record]) -> tuple[list[Record], list[str]]:
    """With best_by: per group of arms (a server's worker sweep), only the best arm's records,
    relabelled as the group; and a line per group saying what the sweep gave."""
    if not study.best_by:
        return records, []
    groups = {a.id: str(a.settings["group"]) for a in study.arms if "group" in a.settings}
    values = _per_arm(records, study.best_by)
    best = best_arms(study, records)
    sweep: dict[str, list[str]] = defaultdict(list)
    labels = {a.id: a.label for a in study.arms}
    for arm_id, group in groups.items():
        if values.get(arm_id) is None:
            sweep[group].append(f"{arm_id} failed")
        else:
            sweep[group].append(f"{arm_id} {_fmt(values[arm_id])}")
    kept = []
    for rec in records:
        arm = str(rec.metadata.get("study_arm"))
        group = groups.get(arm)
        if group is None:
            kept.append(rec)
        elif group in best and best[group].arm == arm:
            kept.append(replace(rec, metadata={**rec.metadata, "study_arm": group}))
    lines = [
        f"- {group}: best {labels[best[group].arm]} ({METRICS[study.best_by]}: "
        f"{', '.join(sweep[group])})"
        if group in best
        else f"- {group}: every arm failed"
        for group in dict.fromkeys(groups.values())
    ]
    return kept, lines


def _run_line(verdict: str, records: list[Record]) -> str:
    host = host_of(records[0])
    started = min(str(r.metadata.get("started_at", "")) for r in records)
    return (
        f"**Verdict: {verdict}** (run {records[0].metadata.get('study_run')} on {host}, "
        f"{len(records)} runs from {started}; rule: the checks below, on ratios measured in "
        "this one run)."
    )


def _closed_label(records: list[Record]) -> str:
    """How the closed-loop arms were loaded, from their records: `closed loop (wrk, 50
    connections)`."""
    closed = [r for r in records if r.offered_rps is None]
    tools_used = ", ".join(sorted({r.load_tool for r in closed})) or "?"
    conns = ", ".join(str(c) for c in sorted({r.concurrency for r in closed}))
    return f"closed loop ({tools_used}, {conns} connections)"


def _open_label(records: list[Record]) -> str:
    """How the open-loop arms were loaded: at equal derived rates, or at fixed ones."""
    opened = [r for r in records if r.offered_rps is not None]
    tools_used = ", ".join(sorted({r.load_tool for r in opened})) or "?"
    if any(r.metadata.get("study_rates") for r in opened):
        return f"open loop ({tools_used}) at equal offered rates"
    rates = " and ".join(_fmt(x) for x in sorted({r.offered_rps or 0.0 for r in opened}))
    fresh = any((r.keepalive or {}).get("client") is False for r in opened)
    return f"open loop ({tools_used}) at {rates} req/s" + (
        ", a new connection per request" if fresh else ""
    )


def _why_changed(study: Study, records: list[Record]) -> str:
    """Why the load models can disagree, in this run's figures."""
    closed = [r for r in records if r.offered_rps is None and r.status == "ok"]
    opened = [r for r in records if r.offered_rps is not None and r.status == "ok"]
    labels = {a.id: a.label for a in study.arms}
    order = [str(a.settings.get("group", a.id)) for a in study.arms]
    rps = _per_arm(closed, "rps")
    paced = ", ".join(
        f"{labels.get(arm, arm)} {_fmt(rps[arm])}"
        for arm in sorted(rps, key=lambda a: order.index(a) if a in order else len(order))
        if rps[arm] is not None
    )
    closed_part = (
        "closed loop, each connection waited for its answer before sending again, so every "
        f"arm ran at the pace it set itself (req/s: {paced}) and the latency covers only the "
        "requests it sent"
    )
    basis = next(
        (r.metadata["study_rate_basis"] for r in opened if "study_rate_basis" in r.metadata), None
    )
    rates = next((r.metadata["study_rates"] for r in opened if "study_rates" in r.metadata), None)
    if basis and rates:
        offered = ", ".join(
            f"{_fmt(float(rate))} ({_percent(f)})" for f, rate in sorted(rates.items())
        )
        open_part = (
            f"open loop, every arm was offered the same {offered} req/s of "
            f"{basis['group']}'s best {_fmt(float(basis['rps']))} req/s (the slowest server, "
            "measured above), with latency counted from each request's intended send time"
        )
    else:
        offered = " and ".join(_fmt(x) for x in sorted({r.offered_rps or 0.0 for r in opened}))
        open_part = (
            f"open loop, requests arrived at {offered} req/s whatever the server did, as a "
            "load balancer sends them, and latency counts from each intended send time"
        )
    return f"Why: {closed_part}; {open_part}."


def _changed_checks(closed: list[Outcome], opened: list[Outcome]) -> list[str]:
    """A line per open-loop check that re-judges a closed-loop one with another outcome."""
    by_id = {o.check["id"]: o for o in closed if "id" in o.check}
    lines = []
    for outcome in opened:
        before = by_id.get(outcome.check.get("rejudges"))
        if before is not None and before.result != outcome.result:
            lines.append(
                f"- {before.check.get('describe', before.check['metric'])}: {before.held} "
                f"closed loop, {outcome.held} open loop "
                f"({outcome.check.get('describe', outcome.check['metric'])})"
            )
    return lines


def _two_model_lines(study: Study, records: list[Record]) -> tuple[list[str], list[str]]:
    """Verdict per load model, the checks of each, and which verdict changed and why; and
    the verdicts."""
    closed_checks = [c for c in study.checks if not study.check_is_open(c)]
    open_checks = [c for c in study.checks if study.check_is_open(c)]
    if not closed_checks:
        # Every arm is open loop (the production studies): one load model, one verdict.
        opened = [_outcome(c, records) for c in open_checks]
        verdict = _verdict(opened)
        label = f"{_open_label(records)}: {verdict}"
        return [_run_line(label, records), "", *(o.line for o in opened), ""], [verdict]
    closed = [_outcome(c, records) for c in closed_checks]
    if not any(r.offered_rps is not None for r in records):
        # Records from before the study had open-loop arms: the closed-loop verdict alone.
        return [
            _run_line(_verdict(closed), records),
            "",
            *(o.line for o in closed),
            "",
            f"Open loop: not in this run (`make study NAME={study.name}` runs it).",
            "",
        ], [_verdict(closed)]
    opened = [_outcome(c, records) for c in open_checks]
    closed_verdict, open_verdict = _verdict(closed), _verdict(opened)
    closed_label, open_label = _closed_label(records), _open_label(records)
    run_line = _run_line(f"{closed_label}: {closed_verdict}; {open_label}: {open_verdict}", records)
    lines = [run_line, ""]
    lines += [f"{closed_label.capitalize()}:", "", *(o.line for o in closed), ""]
    lines += [f"{open_label.capitalize()}:", "", *(o.line for o in opened), ""]
    changed = _changed_checks(closed, opened)
    why = _why_changed(study, records)
    if closed_verdict != open_verdict:
        lines += [
            f"The load model changes the verdict: {closed_verdict} closed loop, "
            f"{open_verdict} open loop. {why}",
            "",
        ]
    else:
        lines += [f"The load model does not change the verdict: {closed_verdict} under both.", ""]
    if changed:
        lines += ["Checks whose outcome changed with the load model:", "", *changed, ""]
        lines += [why, ""] if closed_verdict == open_verdict else []
    return lines, [closed_verdict, open_verdict]


def _verdict_lines(study: Study, records: list[Record]) -> list[str]:
    """The verdict with the run it rests on (per load model where the study has two), a line
    per check, and why it may differ."""
    if any(a.open_loop for a in study.arms):
        lines, verdicts = _two_model_lines(study, records)
    else:
        verdict, check_lines = judge(study, records)
        lines, verdicts = [_run_line(verdict, records), "", *check_lines, ""], [verdict]
    if any(v != "reproduced" for v in verdicts):
        lines += [f"Why it may differ: {study.differs}", ""]
    return lines


def _ordered_cells(study: Study, values: dict[str, dict[Cell, float | None]]) -> list[Cell]:
    """Every measured cell, arms (or their groups) in the file's order, then the rest."""
    order = list(dict.fromkeys([*(str(a.settings.get("group", a.id)) for a in study.arms)]))
    return sorted(
        {c for v in values.values() for c in v},
        key=lambda c: (
            order.index(c[0]) if c[0] in order else len(order),
            c[0],
            c[1],
            c[2],
            c[3] or 0,
        ),
    )


def _results_header(
    metrics: tuple[str, ...], with_published: set[str | None], first: list[str]
) -> list[str]:
    """The results table's header: a published column beside ours where the source has one."""
    header = list(first)
    for metric in metrics:
        if metric in with_published:
            header.append(f"{METRICS[metric]} (published)")
        header.append(f"{METRICS[metric]} (ours)")
    return header


def _arm_labels(study: Study, records: list[Record]) -> dict[str, str]:
    labels = {a.id: a.label for a in study.arms}
    labels |= {
        str(a.settings["group"]): str(a.settings["group"])
        for a in study.arms
        if "group" in a.settings
    }
    for rec in records:  # a second-phase arm: which sweep arm it took the knobs of
        source = rec.metadata.get("study_knobs_from")
        arm = str(rec.metadata.get("study_arm"))
        if source and arm in labels and not labels[arm].endswith(")"):
            labels[arm] = f"{labels[arm]} (knobs of {source})"
    return labels


def _percent(fraction: str) -> str:
    """A fraction as written ("0.8") as a percentage ("80 %")."""
    return f"{float(fraction) * 100:g} %"


def _offered_cell(rec_rates: dict[tuple[str, str], float], arm: str, offered: float) -> str:
    fraction = next((f for (a, f), r in rec_rates.items() if a == arm and r == offered), None)
    return _fmt(offered) + (f" ({_percent(fraction)})" if fraction else "")


def _results_table(study: Study, records: list[Record]) -> list[str]:
    """Per arm, route and concurrency (and offered rate, open loop), the study's metrics:
    published beside ours. Closed- and open-loop arms in tables of their own."""
    closed = [r for r in records if r.offered_rps is None]
    opened = [r for r in records if r.offered_rps is not None]
    labels = _arm_labels(study, records)
    # A "published" column only where the source gave figures for that metric.
    with_published = {fig.get("metric") for fig in study.published}
    paths = {r.scenario: r.path for r in records}
    lines: list[str] = []
    for part, metrics in ((closed, study.metrics), (opened, study.open_metrics)):
        if not part:
            continue
        values = {m: measured(part, m) for m in metrics}
        first = (
            ["arm", "route", "conc."]
            if part is closed
            else ["arm", "route", "conn.", "offered req/s"]
        )
        header = _results_header(metrics, with_published, first)
        rates = fraction_rates(part)
        rows = []
        for arm, scenario, conc, offered in _ordered_cells(study, values):
            row = [labels.get(arm, arm), f"`{paths.get(scenario, scenario)}`", str(conc)]
            if offered is not None:
                row.append(_offered_cell(rates, arm, offered))
            for metric in metrics:
                if metric in with_published:
                    row.append(_published_cell(study, arm, scenario, conc, metric))
                row.append(_fmt(values[metric].get((arm, scenario, conc, offered))))
            rows.append(row)
        if lines:
            lines.append("")
        if opened:
            lines += [
                f"{(_closed_label if part is closed else _open_label)(records).capitalize()}:",
                "",
            ]
        lines += markdown_table(header, rows, "ll" + "r" * (len(header) - 2))
    return lines


def _not_run_table(study: Study) -> list[str]:
    """The source's configurations that cannot run today, with what runs instead."""
    if not study.not_run:
        return []
    header = ["published, not run here", "published", "why not run", "measured instead"]
    rows = [[str(e[k]) for k in NOT_RUN_KEYS] for e in study.not_run]
    return ["", *markdown_table(header, rows, "llll")]


def _failed_lines(records: list[Record]) -> list[str]:
    """A line naming the first failed runs and why, when any failed."""
    failed = [r for r in records if r.status != "ok"]
    if not failed:
        return []
    return [
        "",
        f"{len(failed)} run(s) failed: "
        + "; ".join(
            f"{r.metadata.get('study_arm')} c={r.concurrency}"
            + (f" at {_fmt(r.offered_rps)} req/s" if r.offered_rps is not None else "")
            + f": {(r.reason or '')[:120]}"
            for r in failed[:5]
        ),
    ]


def study_section(study: Study, records: list[Record], plot: str | None) -> list[str]:
    """The summary section of one study, from its latest run's records."""
    records, sweep_lines = collapse_groups(study, records)
    lines = [f"## Study: {study.name} — {study.title}", ""]
    lines += [f"Source: `{SEEDS_URL}/{study.source}`. Claimed: {study.claim}", ""]
    if not records:
        return [*lines, f"Not run yet: `make study NAME={study.name}`.", ""]
    lines += _verdict_lines(study, records)
    if plot:
        lines += [f"![{study.name}]({plot})", ""]
    if sweep_lines:
        lines += ["Worker sweep (the best of each server is kept below):", "", *sweep_lines, ""]
    lines += _results_table(study, records)
    lines += _not_run_table(study)
    lines += _failed_lines(records)
    return [*lines, ""]


def study_series(study: Study, records: list[Record]) -> dict[str, list[tuple]]:
    """Plot data: per closed-loop arm (and route), the plot metric by concurrency."""
    values = measured([r for r in records if r.offered_rps is None], study.plot_metric)
    labels = {a.id: a.label for a in study.arms}
    routes = {scenario for _, scenario, _, _ in values}
    series: dict[str, list[tuple]] = defaultdict(list)
    for (arm, scenario, conc, _), value in values.items():
        label = labels.get(arm, arm) + (f" {scenario}" if len(routes) > 1 else "")
        series[label].append((conc, value))
    return dict(series)


def summary_sections(records: list[Record], results_dir: Path | None = None) -> list[str]:
    """Sections for every study that has records (latest run of each), with plots."""
    from bench.report.plots import plot_study

    lines: list[str] = []
    for name in study_names():
        mine = _latest_run(records, name)
        if not mine:
            continue
        try:
            study = load_study(name)
        except StudyError as exc:
            lines += [f"## Study: {name}", "", f"The study file cannot be read: {exc}", ""]
            continue
        plot = None
        series = study_series(study, mine)
        if results_dir is not None and any(series.values()):
            # (a study whose arms are all open loop has no closed-loop series: no empty plot)
            path = results_dir / "plots" / f"study-{name}.png"
            plot_study(study.title, METRICS[study.plot_metric], series, path)
            plot = str(path.relative_to(results_dir))
        lines += study_section(study, mine, plot)
    return lines
