"""Studies: the source documents' experiments as data, run by the harness, judged by a rule.

Input: bench/studies/<name>.toml (arms = servers with knobs, routes, concurrency, proxy,
keep-alive; the published figures with their source; the checks that decide the verdict).
Output: one harness run per study (its records carry metadata.study), and for summary.md
one section per study: the claim, the published figures beside ours in the same units, a
verdict (`reproduced`, `partly reproduced`, `not reproduced`) decided by the file's checks on
ratios measured in one run, a sentence on why it may differ, and a plot.
"""

from __future__ import annotations

import os
import re
import statistics
import time
import tomllib
from collections import defaultdict
from dataclasses import dataclass, replace
from pathlib import Path

from bench import defaults, plan
from bench.record import Record
from bench.registry import server_ids
from bench.table import markdown_table

STUDIES_DIR = Path(__file__).resolve().parent / "studies"
SEEDS_URL = "../shared/seeds"
METRICS = {
    "rps": "req/s",
    "mean_s": "mean response s",
    "mean_ms": "mean ms",
    "p50_ms": "p50 ms",
    "p99_ms": "p99 ms",
    "errors_pct": "errors %",
    "gateway_errors_pct": "502+504 %",
    "s502": "502s",
    "s504": "504s",
    "overflows": "listen overflows",
    "time_wait": "TIME_WAIT",
    "time_wait_db": "TIME_WAIT at pgbouncer",
    "server_cpu_pct": "server CPU %",
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
}
ARM_SETTINGS = set(SETTING_TYPES)
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
}
_TYPE_NAMES = {str: "a string", dict: "a table", list: "a list", int: "a whole number"}
_TYPE_NAMES[bool] = "true or false"


class StudyError(ValueError):
    """A study file that does not say what the harness needs."""


@dataclass(frozen=True)
class Arm:
    """One configuration of a study: a server with its knobs, and how it is reached."""

    id: str
    label: str
    server: str
    knobs: dict[str, int]
    settings: dict[str, object]  # overrides of the study's [run] table


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


def study_names() -> list[str]:
    """Every study file's name."""
    return sorted(p.stem for p in STUDIES_DIR.glob("*.toml"))


def _type_name(kind: type) -> str:
    return _TYPE_NAMES.get(kind, kind.__name__)


def _check_settings(path: Path, where: str, settings: dict) -> None:
    """[run] or an arm's overrides: known keys with the right types."""
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


def _arm(path: Path, raw: object) -> Arm:
    if not (isinstance(raw, dict) and isinstance(raw.get("id"), str)):
        raise StudyError(f"{path}: every [[arm]] needs an id = '...'")
    if not isinstance(raw.get("server"), str):
        raise StudyError(f"{path}: arm {raw['id']} needs a server = '<server id>'")
    if not isinstance(raw.get("knobs", {}), dict):
        raise StudyError(f"{path}: arm {raw['id']}: knobs must be a table")
    settings = {k: v for k, v in raw.items() if k not in ("id", "label", "server", "knobs")}
    _check_settings(path, f"arm {raw['id']}", settings)
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
    """An arm's settings over [run]: a duration, and scenarios the harness or paths name."""
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
    return arms


def _check_checks(path: Path, checks: list, metrics: tuple[str, ...], names: list[str]) -> None:
    """The [[check]] tables: known metrics and kinds, sides naming an arm or a group."""
    if not checks or not all(isinstance(c, dict) for c in checks):
        raise StudyError(f"{path}: `check` must be one or more [[check]] tables")
    for metric in (*metrics, *(c.get("metric") for c in checks)):
        if metric not in METRICS:
            raise StudyError(f"{path}: unknown metric {metric!r}; valid: {', '.join(METRICS)}")
    for check in checks:
        if check.get("kind") not in ("ratio", "less", "at_most"):
            raise StudyError(f"{path}: check kind must be ratio, less or at_most")
        if check["kind"] == "ratio" and not isinstance(check.get("published"), (int, float)):
            raise StudyError(f"{path}: a ratio check needs published = <the source's ratio>")
        for side in ("a", "b"):
            arm = check.get(side, {}).get("arm") if isinstance(check.get(side), dict) else None
            if arm not in names:
                raise StudyError(
                    f"{path}: check {side} = {{ arm = ... }} names unknown arm {arm!r}"
                )


def load_study(name: str) -> Study:
    """Read and validate bench/studies/<name>.toml; StudyError names the file and the key."""
    path = STUDIES_DIR / f"{name}.toml"
    data = _read_study(path)
    _check_settings(path, "[run]", data["run"])
    arms = _study_arms(path, data)
    names = [a.id for a in arms]
    names += [str(a.settings["group"]) for a in arms if "group" in a.settings]
    metrics = tuple(data.get("metrics", ["rps", "p99_ms"]))
    _check_checks(path, data["check"], metrics, names)
    if not all(isinstance(fig, dict) for fig in data.get("published", [])):
        raise StudyError(f"{path}: `published` must be a list of {{ arm, metric, value }} tables")
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
    )


def arm_options(
    study: Study, arm: Arm, base: plan.Options, run_id: str, duration: int | None = None
) -> plan.Options:
    """The harness options of one arm: the study's [run] table, the arm's overrides, and
    what the user set (DURATION, RESULTS) on top."""
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
    return replace(
        base,
        servers=(arm.server,),
        scenarios=scenarios,
        concurrency=tuple(settings.get("concurrency", defaults.STUDY_CONCURRENCY)),
        duration_s=duration if duration is not None else int(settings["duration"]),
        warmup_s=int(settings.get("warmup", defaults.STUDY_WARMUP_S)),
        trials=int(settings.get("trials", defaults.STUDY_TRIALS)),
        overrides=resolve_knob_expressions(arm.knobs, len(os.sched_getaffinity(0))),
        proxy=None if proxy == "none" else str(proxy),
        keepalive=keepalive,
        upstream_keepalive=None if proxy == "none" else bool(upstream),
        proxy_timeout_s=int(settings.get("proxy_timeout", defaults.PROXY_TIMEOUT_S)),
        paths=paths,
        app_env={k: str(v) for k, v in dict(settings.get("app_env", {})).items()},
        load_timeout_s=int(settings.get("load_timeout", defaults.LOAD_TIMEOUT_S)),
        meta={"study": study.name, "study_arm": arm.id, "study_run": run_id},
    )


_EXPRESSION = re.compile(r"^[0-9+*() ]*(cpus|workers)?[0-9+*() ]*$")


def resolve_knob_expressions(knobs: dict[str, object], cpus: int) -> dict[str, int]:
    """Knob values as written in study files: numbers, or rules such as "2*cpus+1" (Gunicorn's
    documented default) and "2*workers", evaluated for this machine."""
    values: dict[str, int] = {}
    for name in sorted(knobs, key=lambda n: n != "workers"):  # workers first
        raw = knobs[name]
        if isinstance(raw, int):
            values[name] = raw
            continue
        text = str(raw).replace(" ", "")
        if not _EXPRESSION.match(text):
            raise StudyError(f"knob {name} = {raw!r}: only numbers, cpus, workers, + and *")
        names = {"cpus": cpus, "workers": values.get("workers", cpus)}
        # Safe: the pattern above admits only digits, + * ( ) and one of the two names.
        values[name] = int(eval(text, {"__builtins__": {}}, names))
    return values


def study_options(
    names: list[str], base: plan.Options, duration: int | None = None
) -> list[plan.Options]:
    """Options for every arm of every named study, in order (StudyError: a file is unusable)."""
    run_id = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    studies = [load_study(n) for n in names]
    known = server_ids()
    for study in studies:
        for arm in study.arms:
            if arm.server not in known:
                raise StudyError(
                    f"{STUDIES_DIR / study.name}.toml: arm {arm.id} names unknown server "
                    f"{arm.server!r}; valid: {', '.join(known)}"
                )
    return [arm_options(s, arm, base, run_id, duration) for s in studies for arm in s.arms]


# -- judging and reporting --------------------------------------------------------------------


def _errors(rec: Record) -> int:
    errors = rec.errors or {}
    return sum(int(errors.get(k, 0)) for k in ("connect", "read", "write", "timeout", "non_2xx"))


def metric_value(rec: Record, metric: str) -> float | None:
    """One record's value of a study metric (None: not measured or no sample)."""
    latency = rec.latency_ms or {}
    proxy = (rec.errors or {}).get("proxy_by_status") or {}
    sockets = rec.sockets or {}
    attempts = (rec.requests or 0) + sum(
        int((rec.errors or {}).get(k, 0)) for k in ("connect", "read", "write", "timeout")
    )
    if metric == "rps":
        return rec.rps
    if metric in ("mean_s", "mean_ms"):
        mean = latency.get("mean")
        return None if mean is None else mean / (1000 if metric == "mean_s" else 1)
    if metric in ("p50_ms", "p99_ms"):
        return latency.get(metric.removesuffix("_ms"))
    if metric == "errors_pct":
        return 100 * _errors(rec) / attempts if attempts else None
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
    raise KeyError(metric)


Cell = tuple[str, str, int]  # (arm, scenario, concurrency)


def _latest_run(records: list[Record], name: str) -> list[Record]:
    mine = [r for r in records if r.metadata.get("study") == name]
    if not mine:
        return []
    latest = max(str(r.metadata.get("study_run", "")) for r in mine)
    return [r for r in mine if str(r.metadata.get("study_run", "")) == latest]


def measured(records: list[Record], metric: str) -> dict[Cell, float | None]:
    """Median over trials of a metric per (arm, scenario, concurrency), ok runs only."""
    cells: dict[Cell, list[float]] = defaultdict(list)
    seen: set[Cell] = set()
    for rec in records:
        cell = (str(rec.metadata.get("study_arm")), rec.scenario, rec.concurrency)
        seen.add(cell)
        if rec.status != "ok":
            continue
        value = metric_value(rec, metric)
        if value is not None:
            cells[cell].append(value)
    return {c: statistics.median(cells[c]) if cells[c] else None for c in seen}


def _value(values: dict[Cell, float | None], side: dict) -> float | None:
    found = [
        v
        for (arm, scenario, conc), v in values.items()
        if arm == side["arm"]
        and ("concurrency" not in side or conc == side["concurrency"])
        and ("scenario" not in side or scenario == side["scenario"])
    ]
    present = [v for v in found if v is not None]
    return statistics.median(present) if present else None


def judge(study: Study, records: list[Record]) -> tuple[str, list[str]]:
    """The verdict word and a line per check (what was compared, published vs ours)."""
    results, lines = [], []
    for check in study.checks:
        values = measured(records, check["metric"])
        a, b = _value(values, check["a"]), _value(values, check["b"])
        what = check.get("describe", f"{check['metric']} {check['a']} vs {check['b']}")
        if a is None or b is None or (check["kind"] == "ratio" and b == 0):
            results.append("not reproduced")
            lines.append(f"- {what}: not measured (a run failed or had no samples)")
            continue
        if check["kind"] in ("less", "at_most"):
            # less: a < b; at_most: a <= b × factor (e.g. "no faster, within 10 %")
            held = a < b if check["kind"] == "less" else a <= b * float(check.get("factor", 1))
            results.append("reproduced" if held else "not reproduced")
            lines.append(
                f"- {what}: {_fmt(a)} vs {_fmt(b)} — {'holds' if held else 'does not hold'}"
            )
            continue
        ours = a / b
        published = float(check["published"])
        band = float(check.get("band", 2.0))
        same_side = (ours > 1) == (published > 1)
        within = published / band <= ours <= published * band
        results.append(
            "reproduced" if within else ("partly reproduced" if same_side else "not reproduced")
        )
        lines.append(
            f"- {what}: published {published:.2f}×, ours {ours:.2f}× "
            f"({'within' if within else 'outside'} a factor {band:g} of the published ratio"
            f"{'' if within or not same_side else ', same direction'})"
        )
    if all(r == "reproduced" for r in results):
        verdict = "reproduced"
    elif all(r == "not reproduced" for r in results):
        verdict = "not reproduced"
    else:
        verdict = "partly reproduced"
    return verdict, lines


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
    values = measured(records, study.best_by)
    by_arm: dict[str, list[float]] = defaultdict(list)
    for (arm, _, _), value in values.items():
        if value is not None:
            by_arm[arm].append(value)
    best: dict[str, tuple[float, str]] = {}
    sweep: dict[str, list[str]] = defaultdict(list)
    labels = {a.id: a.label for a in study.arms}
    for arm_id, group in groups.items():
        if not by_arm.get(arm_id):
            sweep[group].append(f"{arm_id} failed")
            continue
        value = statistics.median(by_arm[arm_id])
        sweep[group].append(f"{arm_id} {_fmt(value)}")
        if group not in best or value > best[group][0]:
            best[group] = (value, arm_id)
    kept = []
    for rec in records:
        arm = str(rec.metadata.get("study_arm"))
        group = groups.get(arm)
        if group is None:
            kept.append(rec)
        elif best.get(group, (0, None))[1] == arm:
            kept.append(replace(rec, metadata={**rec.metadata, "study_arm": group}))
    lines = [
        f"- {group}: best {labels[best[group][1]]} ({METRICS[study.best_by]}: "
        f"{', '.join(sweep[group])})"
        if group in best
        else f"- {group}: every arm failed"
        for group in dict.fromkeys(groups.values())
    ]
    return kept, lines


def _verdict_lines(study: Study, records: list[Record]) -> list[str]:
    """The verdict with the run it rests on, a line per check, and why it may differ."""
    verdict, check_lines = judge(study, records)
    host = records[0].metadata.get("hostname", "?")
    started = min(str(r.metadata.get("started_at", "")) for r in records)
    lines = [
        f"**Verdict: {verdict}** (run {records[0].metadata.get('study_run')} on {host}, "
        f"{len(records)} runs from {started}; rule: the checks below, on ratios measured in "
        "this one run).",
        "",
        *check_lines,
        "",
    ]
    if verdict != "reproduced":
        lines += [f"Why it may differ: {study.differs}", ""]
    return lines


def _ordered_cells(study: Study, values: dict[str, dict[Cell, float | None]]) -> list[Cell]:
    """Every measured cell, arms (or their groups) in the file's order, then the rest."""
    order = list(dict.fromkeys([*(str(a.settings.get("group", a.id)) for a in study.arms)]))
    return sorted(
        {c for v in values.values() for c in v},
        key=lambda c: (order.index(c[0]) if c[0] in order else len(order), c),
    )


def _results_header(study: Study, with_published: set[str | None]) -> list[str]:
    """The results table's header: a published column beside ours where the source has one."""
    header = ["arm", "route", "conc."]
    for metric in study.metrics:
        if metric in with_published:
            header.append(f"{METRICS[metric]} (published)")
        header.append(f"{METRICS[metric]} (ours)")
    return header


def _results_table(study: Study, records: list[Record]) -> list[str]:
    """Per arm, route and concurrency, the study's metrics: published beside ours."""
    values = {m: measured(records, m) for m in study.metrics}
    labels = {a.id: a.label for a in study.arms}
    labels |= {
        str(a.settings["group"]): str(a.settings["group"])
        for a in study.arms
        if "group" in a.settings
    }
    # A "published" column only where the source gave figures for that metric.
    with_published = {fig.get("metric") for fig in study.published}
    header = _results_header(study, with_published)
    paths = {r.scenario: r.path for r in records}
    rows = []
    for arm, scenario, conc in _ordered_cells(study, values):
        row = [labels.get(arm, arm), f"`{paths.get(scenario, scenario)}`", str(conc)]
        for metric in study.metrics:
            if metric in with_published:
                row.append(_published_cell(study, arm, scenario, conc, metric))
            row.append(_fmt(values[metric].get((arm, scenario, conc))))
        rows.append(row)
    return markdown_table(header, rows, "llr" + "r" * (len(header) - 3))


def _failed_lines(records: list[Record]) -> list[str]:
    """A line naming the first failed runs and why, when any failed."""
    failed = [r for r in records if r.status != "ok"]
    if not failed:
        return []
    return [
        "",
        f"{len(failed)} run(s) failed: "
        + "; ".join(
            f"{r.metadata.get('study_arm')} c={r.concurrency}: {(r.reason or '')[:120]}"
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
    lines += _failed_lines(records)
    return [*lines, ""]


def study_series(study: Study, records: list[Record]) -> dict[str, list[tuple]]:
    """Plot data: per arm (and route), the plot metric by concurrency."""
    values = measured(records, study.plot_metric)
    labels = {a.id: a.label for a in study.arms}
    routes = {scenario for _, scenario, _ in values}
    series: dict[str, list[tuple]] = defaultdict(list)
    for (arm, scenario, conc), value in values.items():
        label = labels.get(arm, arm) + (f" {scenario}" if len(routes) > 1 else "")
        series[label].append((conc, value))
    return dict(series)


def summary_sections(records: list[Record], results_dir: Path | None = None) -> list[str]:
    """Sections for every study that has records (latest run of each), with plots."""
    from bench.plots import plot_study

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
        if results_dir is not None:
            path = results_dir / "plots" / f"study-{name}.png"
            plot_study(study.title, METRICS[study.plot_metric], study_series(study, mine), path)
            plot = str(path.relative_to(results_dir))
        lines += study_section(study, mine, plot)
    return lines
