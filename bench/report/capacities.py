"""Capacity comparisons: which configurations carry more within a latency objective, decided
by the race engine (bench.report.decision) on each round's own capacity.

Input: capacity steps (make capacity's records, bench.harness.capacity; the harness's own
records during a race). Output: one `CapacityRace` per arena: one machine, one session, one
runtime (native, or a container under its CPU and memory limits, or a CPU quota), one
objective, scenario, proxy, keep-alive, protocol and load tool. It holds each
configuration's capacity over all its rounds (bench.report.stats.capacity, 95 %) and, where
two or more configurations were searched, the race (a bench.report.standings.PointRace):
each round's capacity of each configuration (a round is a trial, a fresh start of every
server in a shuffled order: the crossing of that trial's steps alone,
bench.report.stats.crossing), paired by round, ranked and judged by
bench.report.decision.judge (adjacent pairs separated, equivalent within ±MARGIN, or
undecided; Holm over the pairs; alpha spent over the looks of TRIALS=auto's race, or one
look at the rounds run for a fixed TRIALS).

This is the one comparison of capacities: the summary's capacity line (bench.report.glance),
the recommendations (bench.report.recommend) and make capacity TRIALS=auto's rounds
(bench.harness.racing) all read it. Never compared: a configuration with itself (several
searches of one configuration in one arena are its rounds, pooled), capacities of two
machines or two sessions, a container's or a quota's capacity with a native one (issue 32
item 9). A round whose steps all passed, or whose lowest rate failed, has no crossing: it
gives that configuration no figure, and its pairs are judged on the rounds both have one.
Baselines (nginx-static, flask-dev) are left out of the summary's comparisons; the harness
races every server it was asked to (`baselines=True`).

Not ranked as a capacity (issue 32 item 3): a configuration whose knee came while the server
was idle, its median CPU over the steps at the knee (those inside the capacity's interval)
under IDLE_KNEE_CPU_PCT of one CPU: the objective failed on something other than the
server's work (nginx-static failed p99 ≤ 50 ms at 16k req/s at 18 % of one CPU: the VM's
jitter). It is kept in CapacityRace.unranked, with that CPU, and said, never raced; the
harness's own race (point_races) still races it, as before. Not on a route whose requests
wait in the worker (bench.core.scenario's `waits`: /sleep, /upstream): there the knee is the
workers over the wait, reached with the CPU idle by construction.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from bench.core import defaults
from bench.core.record import Record, session_of
from bench.report import decision
from bench.report.cells import host_of
from bench.report.groups import BASELINES, quota_of, runtime_key
from bench.report.openloop import (
    capacity_estimate,
    capacity_outcomes,
    idle_knee,
    knee_cpu_pct,
    searches,
)
from bench.report.standings import PointRace, config_label
from bench.report.stats import Capacity, crossing


@dataclass(frozen=True)
class Entrant:
    """One configuration's capacity in one arena, over every step of every round."""

    label: str  # its name in the race (bench.report.standings.config_label)
    record: Record  # its first step: server, knobs, machine, session
    capacity: Capacity  # 95 % interval
    rounds: dict[int, float | None]  # trial -> that round's crossing (None: none)
    knee_cpu_pct: float | None = None  # the server's median CPU at the knee (100 = one CPU)

    @property
    def idle_knee(self) -> bool:
        """Whether the knee came with the server under IDLE_KNEE_CPU_PCT: not its limit."""
        return idle_knee(self.knee_cpu_pct, self.record.scenario)


@dataclass(frozen=True)
class CapacityRace:
    """One arena's capacities and, with two or more configurations, their race."""

    objective_ms: float
    scenario: str
    machine: str
    entrants: dict[str, Entrant]  # by label
    race: PointRace | None  # None: one configuration, nothing to compare
    # knees at an idle server (Entrant.idle_knee): shown with their CPU, never ranked
    unranked: dict[str, Entrant] = field(default_factory=dict)

    def ranking(self) -> list[Entrant]:
        """Best first: the race's ranking (paired two-way fit), or the capacity alone."""
        if self.race is None:
            return sorted(self.entrants.values(), key=lambda e: -(e.capacity.center or 0.0))
        return [self.entrants[label] for label in self.race.standing.ranking]

    def pairs(self) -> tuple[decision.Pair, ...]:
        """The ranking's adjacent pairs as the race judged them (none without a race)."""
        return self.race.standing.pairs if self.race is not None else ()

    def leader(self) -> Entrant | None:
        """The configuration separated from the next one and first: the race's winner."""
        pairs = self.pairs()
        return self.ranking()[0] if pairs and pairs[0].state == "separated" else None

    def beaten(self, label: str) -> bool:
        """Whether a configuration ranks below a separated pair (something carries more)."""
        order = [e.label for e in self.ranking()]
        if label not in order:
            return False
        return any(p.state == "separated" for p in self.pairs()[: order.index(label)])


def arena_key(rec: Record) -> tuple:
    """What two capacity searches must share to be compared: machine, session, runtime and
    limits (container CPUs and memory, CPU quota), objective, scenario and how the load came."""
    objective = rec.metadata["capacity"]["objective"]
    keepalive = rec.keepalive or {}
    return (
        host_of(rec),
        session_of(rec),
        runtime_key(rec),
        quota_of(rec),
        objective.get("p99_ms"),
        objective.get("p999_ms"),
        rec.scenario,
        rec.proxy,
        keepalive.get("client", True),
        keepalive.get("upstream"),
        rec.load_tool,
        rec.protocol or "http1",
        rec.streams or 1,
        rec.arch,
    )


def round_capacities(steps: list[Record]) -> dict[int, float | None]:
    """Each trial's crossing over its own steps (bench.report.stats.crossing)."""
    by_trial: dict[int, list[Record]] = defaultdict(list)
    for step in steps:
        by_trial[step.trial].append(step)
    return {t: crossing(capacity_outcomes(s)) for t, s in sorted(by_trial.items())}


def _minutes(records: list[Record]) -> float | None:
    try:
        starts = [datetime.fromisoformat(str(r.metadata["started_at"])) for r in records]
        ends = [datetime.fromisoformat(str(r.metadata["ended_at"])) for r in records]
    except (KeyError, ValueError):
        return None
    return (max(ends) - min(starts)).total_seconds() / 60


def _race(point: str, entrants: dict[str, Entrant], steps: list[Record], looks: int | None):
    """The arena's race: each configuration's rounds, judged at the race's last look."""
    figures = {
        label: {t: v for t, v in e.rounds.items() if v is not None} for label, e in entrants.items()
    }
    rounds = max(len(e.rounds) for e in entrants.values())
    settings = steps[0].metadata.get("trials_auto") or {}
    margin = float(settings.get("margin") or defaults.RACE_MARGIN)
    # TRIALS=auto: the looks the race spent its error over; a fixed TRIALS: one look, at the
    # rounds run (decision.spent(n, n), as bench.report.decision.rounds_to_decide counts)
    cap = looks or int(settings.get("max_looks") or 0) or rounds
    standing = decision.judge(
        figures, margin=margin, look=max(1, min(rounds, cap)), max_looks=max(1, cap)
    )
    return PointRace(point, figures, standing, rounds, _minutes(steps), margin, False)


def _entrant(label: str, steps: list[Record]) -> Entrant:
    cap = capacity_estimate(steps)
    return Entrant(label, steps[0], cap, round_capacities(steps), knee_cpu_pct(steps, cap))


def races(
    records: Iterable[Record],
    max_looks: int | None = None,
    baselines: bool = False,
    idle_knees: bool = False,
) -> list[CapacityRace]:
    """Every arena's capacities and race, by machine, objective and scenario (`max_looks`:
    the running race's; None: from the records' trials_auto, or the rounds run). A knee at
    an idle server is left unranked (CapacityRace.unranked) unless `idle_knees`."""
    arenas: dict[tuple, dict[str, list[Record]]] = defaultdict(lambda: defaultdict(list))
    for by_search in searches(list(records)).values():
        for steps in by_search.values():
            for step in steps:
                if baselines or step.server not in BASELINES:
                    arenas[arena_key(step)][step.metadata["capacity"]["search"]].append(step)
    out = []
    for key, by_search in arenas.items():
        knobs: dict[str, set] = defaultdict(set)
        for steps in by_search.values():
            knobs[steps[0].server].add(tuple(sorted((steps[0].knobs or {}).items())))
        several = {server for server, sets in knobs.items() if len(sets) > 1}
        by_config: dict[str, list[Record]] = defaultdict(list)
        for steps in by_search.values():  # one configuration's searches: its rounds, pooled
            by_config[config_label(steps[0], several)].extend(steps)
        found = {label: _entrant(label, steps) for label, steps in by_config.items()}
        entrants = {k: e for k, e in found.items() if idle_knees or not e.idle_knee}
        unranked = {k: e for k, e in found.items() if k not in entrants}
        first = next(iter(by_config.values()))[0]
        p99_ms, scenario = float(key[4]), str(key[6])
        point = f"capacity at p99 ≤ {p99_ms:g} ms, {scenario}"
        every = [s for label in entrants for s in by_config[label]]
        race = _race(point, entrants, every, max_looks) if len(entrants) > 1 else None
        out.append(CapacityRace(p99_ms, scenario, host_of(first), entrants, race, unranked))
    return sorted(out, key=lambda r: (r.machine, r.objective_ms, r.scenario))


def point_races(records: Iterable[Record], max_looks: int) -> list[PointRace]:
    """make capacity TRIALS=auto's standings after a round (bench.harness.racing): every
    arena with two or more configurations, baselines included."""
    found = races(records, max_looks, baselines=True, idle_knees=True)
    return [r.race for r in found if r.race is not None]
