"""Where each TRIALS=auto race stands: records -> one verdict per point, and its lines.

Input: records (ok, steady runs; warm-up starts and marked runs are left out by
bench.report.groups), the race's settings from their metadata.trials_auto. Output: a
`PointRace` per point of one session (the configurations measured there, each one's figure by
round, the Standing bench.report.decision.judge gives them), the progress line after a round
and the summary's "decided in 12 rounds, 9.4 min: granian = uwsgi (±5 %) > uvicorn >
gunicorn-sync".

The figure is req/s of closed-loop points (higher is better) and p99 at a fixed offered rate
(lower is better), one per trial; a round is a trial number (every racing configuration
started once, in a fresh random order). The same judge the harness stops on is the one the
summary prints: both read the records, so the summary says what the race decided.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, replace
from datetime import datetime

from bench.core import defaults
from bench.core.record import Record, of_study
from bench.report import decision
from bench.report.cells import host_of
from bench.report.groups import (
    BASELINES,
    groups,
    is_experiment,
    quota_label,
    quota_of,
    round_figure,
    runtime_key,
    starved,
    under_quota_only,
)


@dataclass(frozen=True)
class PointRace:
    """One point's race: who ran, their figures by round, and the verdict."""

    point: str  # "db c50" (scenario and load), with the machine where it matters
    figures: dict[str, dict[int, float]]  # configuration -> round -> figure
    standing: decision.Standing
    rounds: int  # rounds run (the most any configuration ran)
    minutes: float | None  # from the first run's start to the last run's end
    margin: float
    lower_is_better: bool
    spot: tuple = ()  # (scenario, connections, offered rate): where the harness measures it
    apart: tuple[str, ...] = ()  # left connections unserved: ranked apart, never in the race
    named_with_knobs: frozenset[str] = frozenset()  # servers raced with several knob sets

    def label(self, rec: Record) -> str:
        """A record's configuration name in this race (config_label, as the race named it)."""
        return config_label(rec, self.named_with_knobs)

    def line(self) -> str:
        """ "db c50: decided in 12 rounds, 9.4 min: granian = uwsgi (±5 %) > uvicorn"."""
        how = "decided" if self.standing.done else "undecided"
        took = f", {self.minutes:.1f} min" if self.minutes is not None else ""
        unit = "p99, lower is better; " if self.lower_is_better else ""
        apart = f"; ranked apart (left connections unserved): {', '.join(self.apart)}"
        return (
            f"{self.point}: {how} in {self.rounds} round(s){took}: {unit}{self.standing.line()}"
            + (apart if self.apart else "")
        )

    def notes(self) -> list[str]:
        """Each undecided pair's interval and what would decide it (bench.report.decision),
        then who the screen put out, when and below whom."""
        family = max(1, len(self.standing.racing) - 1)  # the rerun's pairs, Holm over them
        found = (
            decision.undecided_note(p, self.margin, family=family) for p in self.standing.pairs
        )
        screened: dict[tuple, list[decision.Screened]] = defaultdict(list)
        for s in self.standing.screened:
            screened[(s.rounds, s.best, s.test, s.level)].append(s)
        out = [
            f"screened out after {rounds} round(s), each below {best} ({test}'s test after "
            f"Friedman's and the paired t-test, each Holm-adjusted p < {level:.2g}): "
            + ", ".join(s.config for s in group)
            for (rounds, best, test, level), group in screened.items()
        ]
        return [note for note in found if note] + out


def session_of(rec: Record) -> str:
    """The harness invocation a record comes from (its seed for records older than session
    ids: one invocation draws one seed)."""
    meta = rec.metadata
    return str(meta.get("session_id") or f"seed {meta.get('seed')}")


def config_label(rec: Record, servers_with_knobs: AbstractSet[str]) -> str:
    """A configuration's name in the race: the server id, with its knobs where two
    configurations of one server race."""
    if rec.server not in servers_with_knobs:
        return rec.server
    knobs = " ".join(f"{k}={v}" for k, v in sorted((rec.knobs or {}).items()))
    return f"{rec.server} {knobs}".strip()


def servers_with_knobs(records: Iterable[Record]) -> set[str]:
    """The servers of these records that race more than one knob set (named with knobs)."""
    knobs_by_server: dict[str, set] = defaultdict(set)
    for rec in records:
        knobs_by_server[rec.server].add(tuple(sorted((rec.knobs or {}).items())))
    return {s for s, k in knobs_by_server.items() if len(k) > 1}


def _point_key(rec: Record) -> tuple:
    keepalive = rec.keepalive or {}
    return (
        quota_of(rec),
        session_of(rec),
        rec.scenario,
        rec.proxy,
        keepalive.get("client", True),
        keepalive.get("upstream"),
        rec.load_tool,
        rec.protocol or "http1",
        rec.streams or 1,
        rec.concurrency,
        rec.offered_rps,
        rec.metadata.get("study"),
        rec.arch,
        rec.emulated,
        host_of(rec),
        runtime_key(rec),
    )


def spot(rec: Record) -> tuple[str, int | None, int | None]:
    """Where a record's point is measured, as bench.core.plan.rounds names it."""
    rate = int(rec.offered_rps) if rec.offered_rps is not None else None
    return (rec.scenario, rec.concurrency, rate)


def _point_name(rec: Record) -> str:
    load = f"{rec.offered_rps:g} req/s" if rec.offered_rps is not None else f"c{rec.concurrency}"
    proxy = f" via {rec.proxy}" if rec.proxy else ""
    protocol = f" over {rec.protocol}" if rec.protocol not in (None, "http1") else ""
    quota = quota_of(rec)
    under = f" under a {quota_label(quota)}" if quota is not None else ""
    return f"{rec.scenario} {load}{proxy}{protocol}{under}"


def _figure(rec: Record) -> float | None:
    if rec.offered_rps is not None:
        return (rec.latency_ms or {}).get("p99")
    value = rec.achieved_rps if rec.achieved_rps is not None else rec.rps
    return float(value) if value is not None else None


def _minutes(records: list[Record]) -> float | None:
    try:
        starts = [datetime.fromisoformat(str(r.metadata["started_at"])) for r in records]
        ends = [datetime.fromisoformat(str(r.metadata["ended_at"])) for r in records]
    except (KeyError, ValueError):
        return None
    return (max(ends) - min(starts)).total_seconds() / 60


def races(records: Iterable[Record], max_looks: int | None = None) -> list[PointRace]:
    """Every TRIALS=auto point with two or more configurations, judged as the harness judged
    it after its last round (`max_looks`: the race's; None: from the records' settings)."""
    auto = [
        rec
        for group in groups(records).values()
        for rec in group
        if rec.metadata.get("trials_auto")
        and (not is_experiment(rec) or under_quota_only(rec))
        and "tune" not in rec.metadata  # make tune's climbs pair other rounds: its answer file
        and not of_study(rec)  # a study's race is judged by its checks (studies)
        and "capacity" not in rec.metadata  # a search's steps: bench.report.capacities races
    ]
    by_point: dict[tuple, list[Record]] = defaultdict(list)
    for rec in auto:
        by_point[_point_key(rec)].append(rec)
    out = []
    for point_records in by_point.values():
        race = judge_served(point_records, max_looks)
        if race is not None:
            out.append(race)
    return sorted(out, key=lambda r: r.point)


def judge_served(point_records: list[Record], max_looks: int | None = None) -> PointRace | None:
    """One point's race among the configurations that served every connection: one that
    left connections unserved (bench.report.groups.starved: its req/s and latency count only
    the connections it served) is ranked apart, named in the race's `apart`, never raced
    (the harness stops running it there); None: fewer than two configurations to race."""
    several = servers_with_knobs(point_records)
    by_config: dict[str, list[Record]] = defaultdict(list)
    for rec in point_records:
        by_config[config_label(rec, several)].append(rec)
    apart = sorted(name for name, group in by_config.items() if starved(group))
    served = [r for name, group in by_config.items() if name not in apart for r in group]
    race = judge_point(served, max_looks, several) if served else None
    return replace(race, apart=tuple(apart)) if race is not None else None


def judge_point(
    point_records: list[Record],
    max_looks: int | None = None,
    several: AbstractSet[str] | None = None,
) -> PointRace | None:
    """One point's race from its records (None: fewer than two configurations). `several`:
    the servers measured with more than one knob set at the point (judge_served's, so that a
    server whose other knob set was ranked apart keeps its knobs in its label)."""
    if several is None:
        several = servers_with_knobs(point_records)
    slices: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for rec in point_records:
        value = _figure(rec)
        if value is not None:
            slices[config_label(rec, several)][rec.trial].append(float(value))
    # a round's figure: its slices' geometric mean (bench.harness.slices; one run: itself;
    # a slice without requests leaves the round without a figure)
    figures = {
        config: {t: round_figure(v) for t, v in by_trial.items()}
        for config, by_trial in slices.items()
    }
    if len(figures) < 2:
        return None
    settings = point_records[0].metadata.get("trials_auto") or {}
    margin = float(settings.get("margin", defaults.RACE_MARGIN))
    looks_cap = max_looks or int(settings.get("max_looks") or defaults.AUTO_MAX_TRIALS)
    rounds = max(len(v) for v in figures.values())
    lower = point_records[0].offered_rps is not None
    standing = decision.judge(
        figures,
        margin=margin,
        higher_is_better=not lower,
        look=max(1, min(rounds, looks_cap)),
        max_looks=looks_cap,
        screen=True,
        exempt=frozenset(config_label(r, several) for r in point_records if r.server in BASELINES),
    )
    return PointRace(
        _point_name(point_records[0]),
        dict(figures),
        standing,
        rounds,
        _minutes(point_records),
        margin,
        lower,
        spot(point_records[0]),
        named_with_knobs=frozenset(several),
    )


def raced_point(members: dict[tuple, list[Record]]) -> PointRace | None:
    """The race's read-out of one point's configurations (groups of runs by configuration)
    where make bench raced them (TRIALS=auto: every run carries metadata.trials_auto; make
    tune's and capacity's runs are other races): judge_point over the configurations that
    served every connection. Those that left connections unserved are ranked apart, never in
    it (their req/s counts only the connections they served); None: not raced, or fewer than
    two configurations. The one reading of "who leads here" the recommendations and the
    campaign's @leaders share."""
    runs = [r for group in members.values() for r in group]
    raced = all(r.metadata.get("trials_auto") for r in runs) and not any(
        k in r.metadata for r in runs for k in ("tune", "capacity")
    )
    return judge_served(runs) if runs and raced else None


def summary_lines(records: list[Record]) -> list[str]:
    """The summary's lines on how each raced point was decided (empty without a race)."""
    found = races(records)
    if not found:
        return []
    lines = [
        "**Decided by racing** (TRIALS=auto: rounds of the configurations still undecided, "
        "adjacent pairs judged on within-round ratios; `=`: equivalent within ±MARGIN, `>`: "
        "separated, `?`: undecided):",
        "",
    ]
    for race in found:
        lines.append(f"- {race.line()}")
        lines.extend(f"  - {note}" for note in race.notes())
    lines.append("")
    return lines
