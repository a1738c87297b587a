"""A study's arms as harness options, in two phases.

Input: validated studies (bench.studies.schema), the base Options (RESULTS, SEED, this
machine), and for the second phase the first phase's records. Output: plan.Options per arm
(the [run] table, the arm's overrides, DURATION on top; metadata.study/study_arm/study_run),
the second phase's rates (fractions of a measured throughput) and knobs (a group's best
arm's), and the arms in batches of one way of measuring each.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path

from bench.core import defaults, plan, validate
from bench.core.protocol import HTTP1
from bench.core.record import Record
from bench.core.runid import study_run_id
from bench.host.arch import host_arch
from bench.load import default_load_threads
from bench.studies.metrics import per_arm
from bench.studies.schema import (
    RACE_BURST,
    RACE_LOAD,
    Arm,
    Study,
    StudyError,
    in_namespace,
    load_runnable,
    resolve_knob_expressions,
)


def base_options(results: Path, seed: int) -> plan.Options:
    """What every arm starts from: the make defaults on this machine, RESULTS and SEED (a
    study's arms set everything else)."""
    return plan.Options(
        servers=(),
        scenarios=(),
        concurrency=(),
        duration_s=defaults.DURATION_S,
        warmup_s=defaults.STUDY_WARMUP_S,
        trials=defaults.STUDY_TRIALS,
        arch=host_arch(),
        results=results,
        overrides={},
        load_threads=default_load_threads(),
        seed=seed,
    )


def _reach(study: Study, arm: Arm) -> dict[str, object]:
    """The Options fields of how an arm is reached: routes, connections, proxy, keep-alive."""
    settings = study.settings(arm)
    scenarios = tuple(
        settings.get("scenarios", [settings.get("scenario", defaults.STUDY_SCENARIO)])  # type: ignore[call-overload]
    )
    paths = dict(settings.get("paths", {}))  # type: ignore[call-overload]
    if "path" in settings:
        paths[scenarios[0]] = str(settings["path"])
    if arm.load == RACE_LOAD:
        # The race's connections are its burst: that many requests at once after each gap.
        concurrency: tuple = (int(settings.get("race_burst", RACE_BURST)),)  # type: ignore[call-overload]
    elif arm.open_loop and not in_namespace(settings):
        # [run]'s concurrency is the closed-loop arms' connections; an open-loop arm's pool is
        # its own, or (none given) sized per rate by plan.pool_for.
        concurrency = tuple(arm.settings.get("concurrency", ()))  # type: ignore[call-overload]
    else:
        concurrency = tuple(settings.get("concurrency", defaults.STUDY_CONCURRENCY))  # type: ignore[call-overload]
    proxy = settings.get("proxy", defaults.PROXY)
    keepalive = bool(settings.get("keepalive", defaults.KEEPALIVE))
    upstream = settings.get("upstream_keepalive", keepalive)
    return {
        "paths": paths,
        "scenarios": scenarios,
        "concurrency": concurrency,
        "proxy": None if proxy == "none" else str(proxy),
        "keepalive": keepalive,
        "upstream_keepalive": None if proxy == "none" else bool(upstream),
        "proxy_timeout_s": int(settings.get("proxy_timeout", defaults.PROXY_TIMEOUT_S)),  # type: ignore[call-overload]
        "protocol": str(settings.get("protocol", HTTP1)),
        "streams": int(settings.get("streams", 1)),  # type: ignore[call-overload]
        "python": str(settings["python"]) if "python" in settings else None,
    }


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
    settings = study.settings(arm)
    cpus = len(os.sched_getaffinity(0))
    knobs = derived.knobs if derived and derived.knobs is not None else arm.knobs
    quota = settings.get("cpu_quota")
    container = _container(settings, base.mode)
    # The race has no duration of its own: its gaps and rounds decide how long it takes.
    asked = int(settings.get("duration", 0))  # type: ignore[call-overload]
    reach = _reach(study, arm)
    return replace(
        base,
        servers=(arm.server,),
        duration_s=duration if duration is not None and asked else asked,
        warmup_s=int(settings.get("warmup", defaults.STUDY_WARMUP_S)),  # type: ignore[call-overload]
        trials=int(settings.get("trials", defaults.STUDY_TRIALS)),  # type: ignore[call-overload]
        # "quota" counts a container's CPU limit as it counts a native cgroup's quota.
        overrides=resolve_knob_expressions(knobs, cpus, quota or container["cpus"]),  # type: ignore[arg-type]
        cpu_quota=float(quota) if quota is not None else None,  # type: ignore[arg-type]
        lifecycle=str(settings["lifecycle"]) if "lifecycle" in settings else None,
        recycle=int(settings["recycle"]) if "recycle" in settings else None,  # type: ignore[call-overload]
        load_tool=arm.load or base.load_tool,
        rates=tuple(derived.rates.values()) if derived and derived.rates else arm.rates,
        study=plan.StudySettings(
            paths=reach.pop("paths"),  # type: ignore[arg-type]
            app_env={k: str(v) for k, v in dict(settings.get("app_env", {})).items()},  # type: ignore[call-overload]
            load_timeout_s=int(settings.get("load_timeout", defaults.LOAD_TIMEOUT_S)),  # type: ignore[call-overload]
            meta={
                "study": study.name,
                "study_arm": arm.id,
                "study_run": run_id,
                **({"workers_rule": str(knobs["workers"])} if "workers" in knobs else {}),
                **(derived.meta() if derived else {}),
            },
        ),
        **reach,  # type: ignore[arg-type]
        **container,  # type: ignore[arg-type]
    )


def _container(settings: dict[str, object], mode: plan.Mode) -> dict[str, object]:
    """The Options fields of an arm's runtime (RUNTIME=) and its container's limits (CPUS=,
    MEMORY=), from the settings schema.check_runtime validated."""
    memory = settings.get("memory")
    cpus = settings.get("cpus")
    return {
        "mode": replace(mode, runtime=str(settings.get("runtime", mode.runtime))),
        "cpus": float(cpus) if cpus is not None else None,  # type: ignore[arg-type]
        "memory_bytes": validate.parse_memory(str(memory)) if memory is not None else None,
    }


def new_run_id() -> str:
    """The id every record of one `make study` carries (metadata.study_run)."""
    return study_run_id()


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
    values = per_arm(records, study.best_by)
    rps = per_arm(records, "rps")
    best: dict[str, Best] = {}
    for arm in study.arms:
        group, value = arm.settings.get("group"), values.get(arm.id)
        if group is None or value is None:
            continue
        if str(group) not in best or value > best[str(group)].value:
            best[str(group)] = Best(str(group), arm.id, value, rps.get(arm.id))
    return best


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
