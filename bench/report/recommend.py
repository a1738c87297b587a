"""Recommendations: per machine, workload and deployment, the server and knobs to run, the
line to paste, the evidence, the production checks it passed and what to avoid.

Input: every record. Output: `Recommendation`s and their markdown lines, the first section
of summary.md. Nothing is typed in: servers, knobs, figures and intervals come from the
records, command lines from servers/<id>/server.toml rendered with the knobs the evidence
used, the balancer's idle timeout from proxy/alb.conf.template.

The rules (the confidence rules of bench.report.stats):
- A configuration is recommended only where the data decide: it won the capacity race of its
  machine and session (make capacity: each round's capacity paired by round, separated from
  the next by bench.report.decision; bench.report.capacities), or it leads at some load and
  holds the lead at every other load of the workload. Where the loads were raced (make bench
  TRIALS=auto), the race's read-out decides (bench.report.standings, the lines "Decided by
  racing" prints): the leaders at a load are the best configuration and those the race did
  not separate from it; a configuration leads alone where the race separated it from the
  next. Where the race put some configurations below the leaders at one load at least, and
  one or more configurations are among the leaders at every load, those are the leading
  group (as a sole leader leads at some load and holds the lead at every other): the first
  of them (the best at the highest load) is recommended, the others named beside it: as
  equivalent to it where the race decided their pair "within ±MARGIN" at every load it raced
  them (nothing left to race), else as not separated from it, with the command that would
  race them apart. Other
  runs (a fixed TRIALS=): the rank interval by req/s, exactly 1 (significantly ahead of
  every other after Holm's correction) at some load and holding 1 at every other. Two
  configurations that each lead somewhere, a leader whose interval overlaps another's, a
  leader never measured beside a configuration the machine measured for the workload
  (another session's, another search's), or one that left connections unserved
  (bench.report.groups.starved: its latency times only the connections it served): "not
  enough evidence — run: <command>", the command naming at least two servers (a one-server
  run decides nothing).
- One question, one kind of evidence: make bench's runs where there are any; make tune's
  search runs (metadata.tune: many knob sets, few trials each) only where nothing else
  measured the workload and deployment (the search's answer reaches the recommendations
  through make bench's `tuned` runs).
- Baselines (nginx-static, flask-dev) are never recommended nor offered as an alternative.
- Machines apart: one recommendation per machine; emulated runs are a functional check only.
- Workers under a container's limits (bench.report.limits, the container-limits study): per
  server the rule the study's intervals favour at every limit where they decide, with that
  evidence; "not enough evidence — run: make study NAME=container-limits" otherwise.
- Keep-alive above the balancer's idle timeout only where the race study decides it
  (bench.report.keepalive, the decision the study's section shows): the default keep-alive
  lost more requests (502) than the longer one, by an exact test, Holm over the servers.
"""

from __future__ import annotations

import math
import re
import shlex
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from bench.core.defaults import QUOTA_CPUS
from bench.core.record import Record, analysed, flavor_of, of_study
from bench.core.registry import APPS, ROOT, load_all
from bench.report import keepalive, standings
from bench.report.capacities import CapacityRace
from bench.report.capacities import races as capacity_races
from bench.report.cells import host_of, knobs_label, num
from bench.report.decision import margin_text
from bench.report.decision import rounds_to_decide as decision_rounds
from bench.report.groups import (
    BASELINES,
    arena_key,
    groups,
    is_experiment,
    latency_estimate,
    quota_label,
    quota_of,
    rank_groups,
    rps_estimate,
    rps_values,
    starved,
    trial_count,
)
from bench.report.limits import RACE as LIMITS_RACE
from bench.report.limits import Checks, advice
from bench.report.production import recycle_cell, reload_cell
from bench.report.stats import Capacity, pairwise
from bench.report.table import markdown_table

# workload -> the scenarios that measure it (SCENARIO= names)
WORKLOADS: dict[str, tuple[str, ...]] = {
    "light CPU": ("plaintext", "json"),
    "database": ("db", "queries", "fortunes", "updates"),
    "slow upstream": ("upstream", "sleep"),
    "mix": ("saas",),
}
DIRECT, NGINX, ALB = "direct", "behind nginx", "behind the ALB-like front"
QUOTA = "under a CPU quota"
DEPLOYMENTS = (DIRECT, NGINX, ALB, QUOTA)
PROXY_OF = {DIRECT: None, NGINX: "nginx", ALB: "alb"}
# A deployment's make variable where no run says it (under a quota: defaults.QUOTA_CPUS).
MAKE_FLAG = {
    DIRECT: "",
    NGINX: " PROXY=nginx",
    ALB: " PROXY=alb",
    QUOTA: f" CPU_QUOTA={QUOTA_CPUS:g}",
}
NOT_ENOUGH = "not enough evidence — run:"
TRIALS_TO_DECIDE = 5  # what a "run:" command asks for: 3 trials rarely separate close servers
MAX_NAMED = 4  # configurations named in an undecided row's evidence (its command names all)
ALB_TEMPLATE = ROOT / "proxy" / "alb.conf.template"


@dataclass(frozen=True)
class Recommendation:
    """One machine's answer for one workload and deployment: `server` None when the data do
    not decide, then `command` is the run that would produce the evidence."""

    machine: str
    workload: str
    deployment: str
    server: str | None
    knobs: dict = field(default_factory=dict)
    command: str = ""
    evidence: str = "–"
    checks: str = "–"
    avoid: str = "–"
    # make bench's runs of format 11 on: "tuned" (make tune's configuration for this machine
    # and point) or "declared" (server.toml's); "" for older records, which do not say
    configured: str = ""
    # the leading group's other configurations (the race did not separate them from `server`)
    tied: tuple[str, ...] = ()
    # those of them the race found equivalent to `server` within ±equal_margin at every load
    equal: tuple[str, ...] = ()
    equal_margin: float | None = None
    # how sure, in plain words, for the first screen (bench.report.answer): "leads uvicorn by
    # 1.36× [1.24–1.50] at c50", "tied with granian-asgi within ±5 %", ...
    sure: str = ""


def balancer_idle_s() -> int | None:
    """The ALB-like front's upstream idle timeout, from its nginx template."""
    text = ALB_TEMPLATE.read_text() if ALB_TEMPLATE.exists() else ""
    # the block ends at a brace alone on its line: `${APP_SERVER}` inside it has one too
    upstream = re.search(r"upstream app \{(.*?)\n\}", text, re.S)
    found = re.search(r"keepalive_timeout\s+(\d+)s", upstream.group(1)) if upstream else None
    return int(found.group(1)) if found else None


def command_line(server: str, knobs: dict) -> str:
    """The server's declared argv rendered with the knobs the evidence used (defaults of the
    declaration for any it did not record), ready to paste."""
    spec = load_all().get(server)
    if spec is None:
        return "–"
    fill: dict[str, object] = {k: v.default for k, v in spec.knobs.items()}
    fill.update(knobs)
    fill.update(python="python", port=8000, app=APPS.get(spec.app, ""))
    try:
        argv = [arg.format(**fill) for arg in spec.argv]
    except (KeyError, IndexError):
        return "–"
    return shlex.join(argv)


def _identity(rec: Record) -> tuple:
    """One configuration across loads and load tools: server and knobs."""
    return (rec.server, tuple(sorted((rec.knobs or {}).items())))


def config_name(rec: Record) -> str:
    return " ".join(p for p in (rec.server, knobs_label(rec.knobs or {})) if p)


def _interval(est, digits: int = 0) -> str:
    if est is None:
        return "–"
    if est.low is None or est.high is None:
        return f"{num(est.center, digits)} (1 trial)"
    return f"{num(est.center, digits)} [{num(est.low, digits)}–{num(est.high, digits)}]"


def _catalog(records: list[Record], machine: str, scenarios: tuple[str, ...]) -> list[Record]:
    """The steady runs of the workload on the machine: no study, experiment or emulation."""
    return [
        r
        for r in records
        if analysed(r)
        and not r.emulated
        and host_of(r) == machine
        and r.scenario in scenarios
        and not of_study(r)
        and not is_experiment(r)
        # the raw app (APP_FLAVOR=raw) is no deployment: advice is for the framework app
        and flavor_of(r) == "framework"
    ]


def _quota_runs(records: list[Record], machine: str, scenarios: tuple[str, ...]) -> list[Record]:
    """Runs under a CPU quota (CPU_QUOTA=, the cpu-quota study, a container's limits)."""
    return [
        r
        for r in records
        if analysed(r)
        and not r.emulated
        and host_of(r) == machine
        and r.scenario in scenarios
        and quota_of(r) is not None
        and r.lifecycle is None
        and r.recycles is None
    ]


@dataclass
class Arena:
    """Configurations measured side by side at one load, ranked by req/s."""

    members: dict[tuple, list[Record]]
    by_rps: dict
    order: list[tuple]  # best req/s first (the race's ranking where raced)
    race: standings.PointRace | None = None  # the race's read-out of a TRIALS=auto point
    labels: dict[tuple, str] = field(default_factory=dict)  # key -> the race's name for it

    @property
    def first(self) -> Record:
        return next(iter(self.members.values()))[0]

    def leaders(self) -> list[tuple]:
        """The best configuration and those not separated from it: the race's (its best and
        the unseparated ones after it), or those whose rank interval by req/s holds 1."""
        if self.race is not None:
            by_label = {label: key for key, label in self.labels.items()}
            return [by_label[n] for n in self.race.standing.leaders() if n in by_label]
        return [k for k in self.order if self.by_rps[k].low == 1]

    def separated_some(self) -> bool:
        """Whether the race put some configuration below the leaders here."""
        return self.race is not None and len(self.leaders()) < len(self.labels)

    def _ahead(self) -> tuple | None:
        """The configuration ahead of every other (separated from the next), or None."""
        if len(self.order) < 2:
            return None
        if self.race is not None:
            found = self.leaders()
            return found[0] if len(found) == 1 else None
        rank = self.by_rps.get(self.order[0])
        return self.order[0] if rank is not None and rank.low == rank.high == 1 else None

    def sole_leader(self) -> tuple | None:
        """The configuration ahead of every other by req/s, unless it left connections
        unserved (never "best": its latency times only the connections it served)."""
        top = self._ahead()
        return top if top is not None and not starved(self.members[top]) else None

    def starved_leader(self) -> tuple | None:
        """The configuration ahead of every other by req/s that left connections unserved."""
        top = self._ahead()
        return top if top is not None and starved(self.members[top]) else None

    def tied_leaders(self) -> list[tuple]:
        return self.leaders()

    def beaten(self, key: tuple) -> bool:
        """Whether another configuration is significantly ahead of `key` here."""
        if self.race is not None:
            return key in self.labels and key not in self.leaders()
        return self.by_rps[key].low > 1

    def position(self, key: tuple) -> str:
        """`key`'s place in words: its rank interval, or the race's verdict."""
        if self.race is None:
            return f"rank {self.by_rps[key].label} of {len(self.order)} by req/s"
        race = self.race
        found = self.leaders()
        rounds = f"raced {race.rounds} round(s)"
        if found == [key]:
            pair = race.standing.pairs[0] if race.standing.pairs else None
            if pair is None:
                return f"{rounds}: every other screened out below it"
            how = f"{pair.ratio:.2f}×" + (
                f" [{pair.low:.2f}–{pair.high:.2f}]" if pair.low is not None else ""
            )
            return f"{rounds}: first, separated from {pair.worse} ({how})"
        if key in found:
            others = [self.labels[k] for k in found if k != key]
            with_ = f" (with {', '.join(others)})" if len(others) <= MAX_NAMED else ""
            return f"{rounds}: among the {len(found)} leaders of {len(self.labels)}{with_}"
        return f"{rounds}: below the leaders"


def arenas(runs: list[Record]) -> list[Arena]:
    """Closed-loop arenas of the runs (achieved req/s at a fixed rate is not ranked)."""
    closed = [r for r in runs if r.offered_rps is None and r.server not in BASELINES]
    by_arena: dict[tuple, dict[tuple, list[Record]]] = defaultdict(dict)
    for key, group in groups(closed).items():
        by_arena[arena_key(group[0])][key] = group
    out = []
    for members in by_arena.values():
        by_rps, _ = rank_groups(members)
        order = sorted(by_rps, key=lambda k: -rps_estimate(members[k]).center)  # type: ignore[union-attr]
        if not order:
            continue
        race, labels = _race_of(members)
        if race is not None:
            rank = {name: i for i, name in enumerate(race.standing.ranking)}
            order.sort(key=lambda k: rank.get(labels.get(k, ""), len(rank)))
        out.append(Arena(members, by_rps, order, race, labels))
    return sorted(out, key=lambda a: (a.first.scenario, a.first.concurrency))


def _race_of(members: dict[tuple, list[Record]]) -> tuple[standings.PointRace | None, dict]:
    """The race's read-out of an arena whose runs were raced (standings.raced_point: the
    judge the harness stopped on and "Decided by racing" prints, starved configurations
    ranked apart), and each configuration's name in it; (None, {}) otherwise."""
    race = standings.raced_point(members)
    if race is None:
        return None, {}
    labels = {
        key: race.label(group[0])
        for key, group in members.items()
        if group[0].server not in BASELINES and not starved(group)
    }
    return race, labels


def _capacity_leader(caps: list[CapacityRace]) -> Record | None:
    """The configuration that won every capacity race of these runs it took part in (the
    race separated it from the next: bench.report.capacities), and no other won one."""
    leaders = {_identity(e.record): e.record for race in caps if (e := race.leader())}
    return next(iter(leaders.values())) if len(leaders) == 1 else None


@dataclass
class Decision:
    """What the runs of one workload and deployment say: the leading configuration (a
    record of it) or, when undecided, the candidates a further run should compare."""

    leader: Record | None
    arenas: list[Arena]
    capacities: list[CapacityRace]  # one per machine, session, objective and scenario
    candidates: list[Record]
    why: str = ""  # why an undecided question is undecided, where not "intervals overlap"
    tied: list[Record] = field(default_factory=list)  # the leading group's others, undecided
    # the leading group's others the race found equivalent to the leader (_equivalent)
    equal: list[Record] = field(default_factory=list)
    equal_margin: float | None = None


def _beaten(ident: tuple, arenas_: list[Arena], caps: list[CapacityRace]) -> bool:
    """Whether some other configuration is significantly ahead of `ident` anywhere: by req/s
    at a load, or in a capacity race (ranked below a separated pair)."""
    for arena in arenas_:
        for key, group in arena.members.items():
            if _identity(group[0]) == ident and key in arena.order and arena.beaten(key):
                return True
    return any(
        race.beaten(e.label)
        for race in caps
        for e in race.ranking()
        if _identity(e.record) == ident
    )


def _met(ident: tuple, arenas_: list[Arena], caps: list[CapacityRace]) -> set[tuple]:
    """The configurations measured beside `ident` (in one arena or one capacity race)."""
    met: set[tuple] = set()
    for members in [[g[0] for g in a.members.values()] for a in arenas_] + [
        [e.record for e in race.ranking()] for race in caps
    ]:
        idents = {_identity(r) for r in members}
        if ident in idents:
            met |= idents
    return met


def _unmet(ident: tuple, arenas_: list[Arena], caps: list[CapacityRace]) -> dict[tuple, Record]:
    """The leading configurations of the arenas and capacity races `ident` never met (another
    session's or another search's): a leader must have been measured beside them."""
    met = _met(ident, arenas_, caps)
    out: dict[tuple, Record] = {}
    for arena in arenas_:
        for key in arena.tied_leaders() or arena.order[:1]:
            rec = arena.members[key][0]
            if _identity(rec) not in met:
                out.setdefault(_identity(rec), rec)
    for race in caps:
        for entrant in race.ranking()[:1]:
            if _identity(entrant.record) not in met:
                out.setdefault(_identity(entrant.record), entrant.record)
    return out


def _servers(arena: Arena) -> set[str]:
    return {group[0].server for group in arena.members.values()}


def _one_server(arenas_: list[Arena]) -> Decision:
    """Arenas that each hold one server's knob sets alone: no server is chosen, whatever
    the race says. Its knobs against each other are the arithmetic of its own settings
    wherever a route waits (a sync worker serves one request per sleep: w5 against w4 is
    5/4 under a CPU quota or not), which the studies measure, not a choice of server
    (issue 32 item 6; avoid() refuses the same comparison)."""
    servers = sorted({s for a in arenas_ for s in _servers(a)})
    best = {_identity(a.members[a.order[0]][0]): a.members[a.order[0]][0] for a in arenas_}
    why = (
        f"only {', '.join(servers)} measured at each load here, its knob sets against each "
        "other (the arithmetic of its own settings, not a choice of server): nothing to compare"
    )
    return Decision(None, arenas_, [], list(best.values()), why)


def decide(runs: list[Record]) -> Decision:
    """The configuration the data single out, or the candidates still tied. Only arenas
    where two servers or more met choose a server (_one_server)."""
    measured = arenas(runs)
    caps = capacity_races(runs)
    arenas_ = [a for a in measured if len(_servers(a)) >= 2]
    if not arenas_ and not caps:
        if any(len(a.order) >= 2 for a in measured):
            return _one_server(measured)
        arenas_ = measured  # one configuration alone: _undecided says so
    winners: dict[tuple, Record] = {}
    why = ""
    for arena in arenas_:
        if (key := arena.sole_leader()) is not None:
            winners[_identity(arena.members[key][0])] = arena.members[key][0]
        elif (key := arena.starved_leader()) is not None:
            rec = arena.members[key][0]
            why = (
                f"{config_name(rec)} leads by req/s at c{rec.concurrency} but left connections "
                "unserved (under half served: its latency times only those): never recommended"
            )
    if (cap_leader := _capacity_leader(caps)) is not None:
        winners[_identity(cap_leader)] = cap_leader
    if len(winners) == 1:
        ident, rec = next(iter(winners.items()))
        unmet = _unmet(ident, arenas_, caps)
        if not _beaten(ident, arenas_, caps) and not unmet:
            return Decision(rec, arenas_, caps, [rec])
        if unmet:
            names = ", ".join(config_name(r) for r in list(unmet.values())[:MAX_NAMED])
            why = f"{config_name(rec)} leads where it ran but was never measured beside {names}"
            return Decision(None, arenas_, caps, [rec, *unmet.values()], why)
    if not winners and (group := leading_group(arenas_)):
        first, *others = group
        if not _unmet(_identity(first), arenas_, caps):
            margins = [_equivalent(arenas_, first, r) for r in others]
            return Decision(
                first,
                arenas_,
                caps,
                group,
                tied=[r for r, m in zip(others, margins, strict=True) if m is None],
                equal=[r for r, m in zip(others, margins, strict=True) if m is not None],
                equal_margin=max((m for m in margins if m is not None), default=None),
            )
    candidates: dict[tuple, Record] = dict(winners)
    for arena in sorted(arenas_, key=lambda a: -a.first.concurrency)[:1]:
        for key in arena.tied_leaders():
            candidates.setdefault(_identity(arena.members[key][0]), arena.members[key][0])
    for race in caps:
        for entrant in race.ranking()[:2]:
            candidates.setdefault(_identity(entrant.record), entrant.record)
    return Decision(None, arenas_, caps, list(candidates.values()), why)


def leading_group(arenas_: list[Arena]) -> list[Record]:
    """The configurations among the race's leaders at every load, best at the highest load
    first, where the race put some configuration below the leaders at one load at least (as
    a sole leader leads at some load and holds the lead at every other); [] otherwise (see
    the module's docstring). One that left connections unserved is never among them."""
    if not any(a.separated_some() for a in arenas_):
        return []
    common: set[tuple] | None = None
    for arena in arenas_:
        found = {
            _identity(arena.members[k][0]) for k in arena.leaders() if not starved(arena.members[k])
        }
        common = found if common is None else common & found
    top = max(arenas_, key=lambda a: a.first.concurrency)
    return [
        top.members[k][0] for k in top.order if common and _identity(top.members[k][0]) in common
    ]


def _equivalent(arenas_: list[Arena], a: Record, b: Record) -> float | None:
    """The margin within which the race found a and b equivalent at every load it raced them
    (their pair adjacent in its ranking and decided "equivalent": nothing left to race), or
    None (undecided somewhere, not adjacent, or never raced together). Equivalence is not
    chained: a = b and b = c within ±5 % leaves a against c undecided."""
    margin = None
    for arena in arenas_:
        if arena.race is None:
            continue
        names = {_identity(arena.members[k][0]): label for k, label in arena.labels.items()}
        found = {names.get(_identity(a)), names.get(_identity(b))} - {None}
        if len(found) < 2:
            if found:
                return None
            continue
        pair = next((p for p in arena.race.standing.pairs if {p.better, p.worse} == found), None)
        if pair is None or pair.state != "equivalent":
            return None
        margin = max(margin or 0.0, arena.race.standing.margin)
    return margin


def _arena_evidence(arena: Arena, key: tuple) -> str:
    """One configuration's req/s and p99 at one load, with its rank there."""
    group = arena.members[key]
    first = group[0]
    quota = quota_of(first)
    under = f", {quota_label(quota)}" if quota is not None else ""
    load = f"c{first.concurrency} ({first.load_tool}{under})"
    return (
        f"{load}: {_interval(rps_estimate(group))} req/s, p99 "
        f"{_interval(latency_estimate(group), 1)} ms, {arena.position(key)}"
    )


def _capacity_evidence(caps: list[CapacityRace], ident: tuple) -> str:
    """The configuration's capacity in the race it won, the next one's, and how the race
    decided (bench.report.capacities)."""
    for race in caps:
        ranking = race.ranking()
        if race.leader() is None or _identity(ranking[0].record) != ident:
            continue
        pair, nxt = race.pairs()[0], ranking[1]
        interval = f" [{pair.low:.2f}–{pair.high:.2f}]" if pair.low is not None else ""
        return (
            f"capacity at p99 ≤ {race.objective_ms:g} ms: {_cap_text(ranking[0].capacity)} "
            f"req/s, {pair.ratio:.2f}×{interval} the next (paired by round, {pair.rounds} "
            f"rounds: separated): {config_name(nxt.record)} {_cap_text(nxt.capacity)} req/s"
        )
    return ""


def _cap_text(cap: Capacity) -> str:
    if cap.low is None or cap.high is None:
        return num(cap.center)
    return f"{num(cap.center)} [{num(cap.low)}–{num(cap.high)}]"


def _lead(decision: Decision) -> str:
    """How the sole leader leads, in words: the race's ratio over the next at the highest load
    it was separated there, or its capacity ratio, or its rank; '' when it leads nowhere."""
    ident = _identity(decision.leader) if decision.leader is not None else None
    for arena in sorted(decision.arenas, key=lambda a: -a.first.concurrency):
        key = arena.sole_leader()
        if key is None or _identity(arena.members[key][0]) != ident:
            continue
        load = f"at c{arena.first.concurrency}"
        pair = arena.race.standing.pairs[0] if arena.race and arena.race.standing.pairs else None
        if pair is None:
            return f"ahead of every other {load} ({arena.position(key)})"
        spread = f" [{pair.low:.2f}–{pair.high:.2f}]" if pair.low is not None else ""
        return f"leads {pair.worse} by {pair.ratio:.2f}×{spread} {load} (raced)"
    for race in decision.capacities:
        ranking = race.ranking()
        if race.leader() is not None and ranking and _identity(ranking[0].record) == ident:
            pair = race.pairs()[0]
            nxt = config_name(ranking[1].record)
            return f"capacity {pair.ratio:.2f}× {nxt}'s at p99 ≤ {race.objective_ms:g} ms"
    return _shared_lead(decision)


def _shared_lead(decision: Decision) -> str:
    """A leader that leads nowhere alone: among the leaders at every load, the only one at all
    of them, separated from none of those beside it (said plainly, never as a win)."""
    ident = _identity(decision.leader) if decision.leader is not None else None
    beside = []
    for arena in sorted(decision.arenas, key=lambda a: a.first.concurrency):
        found = arena.leaders()
        if not any(_identity(arena.members[k][0]) == ident for k in found):
            continue
        others = [
            arena.labels.get(k, config_name(arena.members[k][0]))
            for k in found
            if _identity(arena.members[k][0]) != ident
        ]
        if others:
            beside.append(f"c{arena.first.concurrency} with {', '.join(others[:MAX_NAMED])}")
    if not beside:
        return ""
    return (
        f"among the leaders at every load ({'; '.join(beside)}), the only one at all of them; "
        "separated from none of those yet"
    )


def sure(decision: Decision, command: str = "", flag: str = "") -> str:
    """How sure a row's pick is, in plain words for the first screen: leads whom by how much,
    tied within a margin, not separated yet (with the run that would decide), or no pick."""
    if decision.leader is None:
        return f"no pick yet — `{command}` would decide" if command else "no pick yet"
    if decision.tied:
        names = ", ".join(config_name(r) for r in decision.tied[:MAX_NAMED])
        more = len(decision.tied) - MAX_NAMED
        names += f" and {more} more" if more > 0 else ""
        return f"not separated from {names} yet — `{group_command(decision)}{flag}` would decide"
    if decision.equal:
        names = ", ".join(config_name(r) for r in decision.equal)
        return f"tied with {names} within {_margin(decision.equal_margin)}: either serves as well"
    return _lead(decision) or "the only configuration measured here"


def evidence(decision: Decision, flag: str = "") -> str:
    """The leader's capacity and its figures at the highest load it led or held rank 1;
    the leading group's others and the command that would race them apart (`flag`: the
    deployment's make variable)."""
    leader = decision.leader
    if leader is None:
        return "–"
    ident = _identity(leader)
    parts = [_capacity_evidence(decision.capacities, ident)]
    held = [
        (arena, key)
        for arena in decision.arenas
        for key, group in arena.members.items()
        if _identity(group[0]) == ident and len(arena.order) > 1
    ]
    held.sort(
        key=lambda ak: (
            ak[0].by_rps[ak[1]].high if ak[0].race is None else 1,
            -ak[0].first.concurrency,
        )
    )
    parts += [_arena_evidence(arena, key) for arena, key in held[:2]]
    if decision.equal:
        names = ", ".join(config_name(r) for r in decision.equal)
        parts.append(
            f"the race found {names} equivalent to it within {_margin(decision.equal_margin)} "
            "at every load it raced them: either serves this workload as well"
        )
    if decision.tied:
        names = ", ".join(config_name(r) for r in decision.tied)
        parts.append(
            f"leading group: the race did not separate {names} from it at any load; "
            f"`{group_command(decision)}{flag}` would race them apart"
        )
    if apart := _ranked_apart(decision.arenas, ident):
        parts.append(
            f"left connections unserved (under half served), ranked apart, never "
            f"recommended: {'; '.join(apart)}"
        )
    return "; ".join(p for p in parts if p) or "–"


def _ranked_apart(arenas_: list[Arena], ident: tuple) -> list[str]:
    """The configurations other than `ident` that left connections unserved at some load,
    with those loads (ranked apart there, so never among its leaders: a row that leaves
    one out must say why)."""
    loads: dict[str, list[str]] = {}
    for arena in arenas_:
        for group in arena.members.values():
            if _identity(group[0]) != ident and starved(group):
                loads.setdefault(config_name(group[0]), []).append(f"c{group[0].concurrency}")
    return [f"{label} at {', '.join(where)}" for label, where in loads.items()]


def _margin(margin: float | None) -> str:
    return margin_text(margin or 0.0)


def group_command(decision: Decision) -> str:
    """The make bench race of the leading group alone, at the loads it was raced at, with
    the minutes its pairs would need as their noise stands (bench.report.decision
    .rounds_to_decide, at each race's minutes per configuration and round)."""
    assert decision.leader is not None
    group = [decision.leader, *decision.tied]
    servers = ",".join(dict.fromkeys(r.server for r in group))
    scenarios = ",".join(sorted({a.first.scenario for a in decision.arenas}))
    loads = ",".join(str(c) for c in sorted({a.first.concurrency for a in decision.arenas}))
    budget = race_budget(decision.arenas, {_identity(r) for r in group})
    return (
        f"make bench SERVER={servers} SCENARIO={scenarios} CONCURRENCY={loads} TRIALS=auto "
        f"BUDGET={budget}"
    )


def race_budget(arenas_: list[Arena], idents: set[tuple]) -> int:
    """The minutes a race of these configurations alone would need at the raced loads, as
    their pairs' noise stands (bench.report.decision.rounds_to_decide; a pair the estimate
    cannot bound, the rounds run), at each race's minutes per configuration and round."""
    minutes = 0.0
    for arena in arenas_:
        race = arena.race
        if race is None or not race.minutes or not race.rounds:
            continue
        names = {arena.labels[k] for k in arena.order if _identity(arena.members[k][0]) in idents}
        needed = [
            decision_rounds(p, race.margin)
            for p in race.standing.pairs
            if p.better in names and p.worse in names
        ]
        rounds = max((n for n in needed if n is not None), default=race.rounds)
        per = race.minutes / (race.rounds * max(1, len(race.figures)))
        minutes += rounds * per * len(names)
    return min(1_440, max(5, math.ceil(minutes)))


def avoid(decision: Decision) -> str:
    """The slowest configuration of another server significantly behind the fastest at the
    highest load, with both figures and the Holm-corrected ratio (against the recommended one,
    if any). Why another server only: one server's knobs against each other are the arithmetic
    of its settings wherever a route waits (a sync worker serves one request per 100 ms sleep:
    w1 against w5 is 5×, under a CPU quota or not), not a finding about what to avoid; which
    knobs to run is the recommendation's and the studies' question (issue 32 item 6)."""
    leader = _identity(decision.leader) if decision.leader is not None else None
    for arena in sorted(decision.arenas, key=lambda a: -a.first.concurrency):
        if len(arena.order) < 2:
            continue
        mine = [k for k in arena.order if leader and _identity(arena.members[k][0]) == leader]
        if leader and not mine:
            continue
        best = (mine or arena.order)[0]
        # another server: one server's knobs against each other (w1 vs w5 on a 100 ms sleep
        # under a quota) is arithmetic of its own settings, which the studies measure
        server = arena.members[best][0].server
        others = [k for k in arena.order if arena.members[k][0].server != server]
        if not others:
            continue
        worst = others[-1]
        family = pairwise({k: rps_values(arena.members[k]) for k in arena.order})
        diff = family[(best, worst)]
        if not diff.significant or diff.low is None:
            continue
        b, w = arena.members[best], arena.members[worst]
        return (
            f"{config_name(w[0])}: {num(rps_estimate(w).center)} vs {num(rps_estimate(b).center)} "  # type: ignore[union-attr]
            f"req/s of {config_name(b[0])} at c{arena.first.concurrency} "
            f"({diff.ratio:.2f}× [{diff.low:.2f}–{diff.high:.2f}], significant)"
        )
    return "–"


@dataclass(frozen=True)
class Race:
    """One server's keep-alive race behind the ALB-like front on one machine: 502s in
    requests sent with its default keep-alive and with one above the balancer's idle timeout,
    as bench.report.keepalive decided it (the study's section says the same)."""

    server: str
    default: tuple[int, int]  # (502s, sent)
    longer: tuple[int, int] | None
    keepalive_s: object  # the longer keep-alive's knob value
    p: float | None  # the exact test's p, Holm-adjusted over the servers with both arms
    result: str = "inconclusive"  # reproduced: the longer keep-alive lowered the 502 rate
    why: str = ""  # why it is undecided

    @property
    def decided(self) -> bool:
        return self.result == "reproduced"


def races(records: list[Record], machine: str) -> dict[str, Race]:
    """Per server, its race on the machine (bench.report.keepalive.fixes: each arm's latest
    run, default and fix arms of this machine only)."""
    out = {}
    for (where, server), fix in keepalive.fixes(records).items():
        if where != machine:
            continue
        longer = keepalive.counts(fix.fixed) if fix.fixed is not None else None
        value = (fix.fixed.knobs or {}).get("keepalive") if fix.fixed is not None else None
        p = fix.pair.p if fix.pair is not None else None
        asked = fix.fixed is not None or fix.fix_elsewhere  # a fix arm ran somewhere
        why = keepalive.why_undecided(fix) if fix.result == "inconclusive" and asked else ""
        out[server] = Race(server, keepalive.counts(fix.default), longer, value, p, fix.result, why)
    return out


def _clears_balancer(race: Race) -> bool:
    """Whether the longer keep-alive is known to outlast the balancer's idle timeout (read
    from its template: unknown, no keep-alive line is pasted)."""
    idle = balancer_idle_s()
    return idle is not None and isinstance(race.keepalive_s, int) and race.keepalive_s > idle


def race_text(race: Race | None, server: str) -> str:
    """The race's counts in words, and whether they decide the keep-alive."""
    if race is None:
        return f"keep-alive race not measured for {server} (make study NAME=lb-keepalive-race)"
    lost, sent = race.default
    text = f"race: {num(lost)} 502s in {num(sent)} requests at its default keep-alive"
    if race.longer is not None:
        text += f", {num(race.longer[0])} in {num(race.longer[1])} at {race.keepalive_s} s"
        p = f"exact test, adjusted p = {race.p:.3f}" if race.p is not None else "exact test"
        text += f" ({p}{'' if race.decided else ', not decided'})"
    elif race.why:
        text += f" ({race.why})"
    return text


def checks(server: str, records: list[Record], race: Race | None) -> str:
    """The production checks measured for the server: reload, recycling, the race."""
    spec = load_all().get(server)
    if spec is None:
        return "–"
    reload_why = spec.reload_why if spec.reload_signal is None else None
    recycle_why = spec.recycle_why if spec.recycle_argv is None else None
    return (
        f"reload: {reload_cell(server, records, reload_why)}; "
        f"recycling: {recycle_cell(server, records, recycle_why)}; {race_text(race, server)}"
    )


def two_or_more(servers: list[str], others: Sequence[str]) -> list[str]:
    """`servers`, and `others` (in their order) added until there are two: one server alone
    decides nothing."""
    servers = list(servers)
    for other in others:
        if len(servers) >= 2:
            break
        if other not in servers:
            servers.append(other)
    return servers


def run_command(
    decision: Decision, scenarios: tuple[str, ...], deployment: str, others: Sequence[str] = ()
) -> str:
    """The make command that would decide between the candidates: every candidate's server,
    and at least two servers (one alone decides nothing): then `others` (the machine's other
    servers measured for the workload, best first)."""
    # every candidate: a command that leaves one out cannot decide the row
    servers = two_or_more(list(dict.fromkeys(r.server for r in decision.candidates)), others)
    servers = servers or ["all"]
    measured = sorted({r.scenario for r in decision.candidates}) or [scenarios[0]]
    flag = make_flag(deployment, decision.candidates)
    raced = [a for a in decision.arenas if a.race is not None]
    if raced:  # a race of the candidates at the loads raced, as long as their noise needs
        loads = ",".join(str(c) for c in sorted({a.first.concurrency for a in raced}))
        idents = {_identity(r) for r in decision.candidates}
        return (
            f"make bench SERVER={','.join(servers)} SCENARIO={','.join(measured)} "
            f"CONCURRENCY={loads} TRIALS=auto BUDGET={race_budget(raced, idents)}{flag}"
        )
    if decision.arenas or not decision.capacities:
        conc = max((a.first.concurrency for a in decision.arenas), default=None)
        load = " LOAD=locust" if measured == ["saas"] else ""
        extra = f" CONCURRENCY={conc}" if conc else ""
        return (
            f"make bench SERVER={','.join(servers)} SCENARIO={','.join(measured)}{extra}"
            f" TRIALS={TRIALS_TO_DECIDE}{load}{flag}"
        )
    return f"make capacity SERVER={','.join(servers)} SCENARIO={','.join(measured)}{flag}"


def make_flag(deployment: str, runs: Sequence[Record] = ()) -> str:
    """The make variable of a deployment for a command that would measure these runs again:
    under a CPU quota, the quota they ran at (the most runs' where several), not a 1-CPU
    quota that does not bind on 2 CPUs (the cpu-quota study's 0.5 and 0.25 CPU)."""
    quotas = Counter(q for r in runs if (q := quota_of(r)) is not None).most_common(1)
    if deployment == QUOTA and quotas:
        return f" CPU_QUOTA={quotas[0][0]:g}"
    return MAKE_FLAG[deployment]


def _steady(runs: list[Record]) -> list[Record]:
    """Runs with keep-alive on both sides: the line to paste cannot carry a proxy's setting."""
    return [
        r
        for r in runs
        if (r.keepalive or {}).get("client") is not False
        and (r.keepalive or {}).get("upstream") is not False
    ]


def deployment_runs(
    records: list[Record], machine: str, scenarios: tuple[str, ...], deployment: str
) -> list[Record]:
    if deployment == QUOTA:
        return _bench_first(_quota_runs(records, machine, scenarios))
    proxy = PROXY_OF[deployment]
    catalog = _catalog(records, machine, scenarios)
    return _bench_first(_steady([r for r in catalog if r.proxy == proxy]))


def _bench_first(runs: list[Record]) -> list[Record]:
    """make bench's runs where there are any; make tune's search runs (metadata.tune) only
    where nothing else measured the question: a search's session has many knob sets of few
    trials each, and would outvote or stall the bench session's answer."""
    bench = [r for r in runs if "tune" not in r.metadata]
    return bench or runs


def _servers_by_speed(records: list[Record], machine: str, scenarios: tuple[str, ...]) -> list[str]:
    """The machine's servers measured for the workload (closed loop, any deployment, no
    baseline), fastest first by their best req/s: the servers a "run:" command adds when its
    candidates name fewer than two."""
    best: dict[str, float] = {}
    for group in groups(_catalog(records, machine, scenarios)).values():
        first = group[0]
        if first.offered_rps is not None or first.server in BASELINES:
            continue
        if (est := rps_estimate(group)) is not None:
            best[first.server] = max(best.get(first.server, 0.0), est.center)
    return sorted(best, key=lambda s: (-best[s], s))


def _recommend(
    records: list[Record],
    machine: str,
    workload: str,
    deployment: str,
    runs: list[Record],
    races_: dict[str, Race],
    elsewhere: list[Record],
) -> Recommendation:
    """One workload × deployment on one machine; `elsewhere`: behind the balancer without
    runs of its own, the candidates measured elsewhere (_candidates_elsewhere)."""
    scenarios = WORKLOADS[workload]
    decision = Decision(None, [], [], elsewhere) if deployment == ALB and not runs else decide(runs)
    leader = decision.leader
    if leader is None:
        # the workload's other servers first, then any the machine measured
        everything = tuple(s for names in WORKLOADS.values() for s in names)
        others = [
            *_servers_by_speed(records, machine, scenarios),
            *_servers_by_speed(records, machine, everything),
        ]
        command = run_command(decision, scenarios, deployment, others)
        named = {r.server for r in decision.candidates}
        why = [] if deployment == ALB and not runs else [_undecided(decision)]
        if deployment == ALB:  # each candidate's race, named: four counts alone say nothing
            why += [f"{s}: {race_text(races_.get(s), s)}" for s in sorted(named)]
        return Recommendation(
            machine,
            workload,
            deployment,
            None,
            command=command,
            evidence="; ".join(why),
            avoid=avoid(decision),
            sure=sure(decision, command),
        )
    knobs = dict(leader.knobs or {})
    race = races_.get(leader.server)
    if deployment == ALB and race is not None and race.decided and _clears_balancer(race):
        knobs["keepalive"] = race.keepalive_s
    return Recommendation(
        machine,
        workload,
        deployment,
        leader.server,
        knobs,
        command_line(leader.server, knobs),
        evidence(decision, make_flag(deployment, [leader])),
        checks(leader.server, [r for r in records if host_of(r) == machine], race),
        avoid(decision),
        configured_as(leader),
        tuple(config_name(r) for r in decision.tied),
        tuple(config_name(r) for r in decision.equal),
        decision.equal_margin,
        sure(decision, flag=make_flag(deployment, [leader])),
    )


def _candidates_elsewhere(
    records: list[Record], machine: str, scenarios: tuple[str, ...]
) -> list[Record]:
    """No throughput behind the balancer: the best candidates measured behind nginx, else
    direct ([] when the workload has neither: nothing to put behind the balancer)."""
    for other in (NGINX, DIRECT):
        if found := decide(deployment_runs(records, machine, scenarios, other)).candidates:
            return found
    return []


def configured_as(rec: Record) -> str:
    """Whether a run's configuration was make tune's ("tuned") or server.toml's ("declared");
    "" for records before format 11, which do not say, and for make tune's own runs."""
    if "tuned" not in rec.metadata or "tune" in rec.metadata:  # not make bench's, or a search's
        return ""
    return "tuned" if rec.metadata["tuned"] else "declared"


def _undecided(decision: Decision) -> str:
    """Why the data do not decide: one configuration, or leaders whose intervals overlap."""
    if len(decision.arenas) + len(decision.capacities) == 0:
        return "no run"
    if decision.why:
        return decision.why
    names = ", ".join(config_name(r) for r in decision.candidates[:MAX_NAMED])
    if len({_identity(r) for r in decision.candidates}) < 2 and all(
        len(a.order) < 2 for a in decision.arenas
    ):
        return f"only {names} measured: nothing to compare"
    raced = [a for a in decision.arenas if a.race is not None]
    if raced:
        loads = [a for a in raced if not a.separated_some()]
        where = ", ".join(f"c{a.first.concurrency}" for a in loads)
        if loads:
            rounds = max(a.race.rounds for a in loads)  # type: ignore[union-attr]
            return (
                f"raced {rounds} round(s): the race separated no configuration from the "
                f"leaders at {where}; leaders: {names}"
            )
        return f"raced: no configuration leads at every load; leaders: {names}"
    members = [g for a in decision.arenas for g in a.members.values()]
    trials = min((trial_count(g) for g in members), default=None)
    few = f"; {trials} trial(s) per configuration" if trials else ""
    return f"leaders' intervals overlap: {names}{few}"


def machines(records: list[Record]) -> list[str]:
    """The machines with native (or same-arch) runs, in name order."""
    return sorted({host_of(r) for r in records if not r.emulated})


def _measure_command(
    records: list[Record], machine: str, scenarios: tuple[str, ...], deployment: str
) -> str:
    """The make bench that measures a workload in a deployment not measured yet on the
    machine: the servers measured for the workload there (any deployment, fastest first),
    at least two (the machine's fastest elsewhere beside one), raced, so that its answer is a
    row (make bench alone measures one server: a row of one decides nothing)."""
    ok = [r for r in records if host_of(r) == machine and r.status == "ok"]
    scenario = next(s for s in scenarios if any(r.scenario == s for r in ok))
    # fastest first where ranked runs say so; else (only quota, container or study runs)
    # every server measured for the workload, by name
    others = sorted({r.server for r in ok if r.scenario in scenarios} - set(BASELINES))
    servers = _servers_by_speed(records, machine, scenarios) or others
    if len(servers) < 2:  # one alone decides nothing: the machine's fastest elsewhere beside it
        every = tuple(s for names in WORKLOADS.values() for s in names)
        servers = two_or_more(servers, _servers_by_speed(records, machine, every))
    named = f"SERVER={','.join(servers)} " if servers else ""
    load = " LOAD=locust" if scenario == "saas" else ""
    return f"make bench {named}SCENARIO={scenario} TRIALS=auto{load}{MAKE_FLAG[deployment]}"


def recommendations(records: list[Record]) -> tuple[list[Recommendation], dict[str, list[str]]]:
    """Every machine's recommendations, and per machine the workload × deployment pairs not
    measured yet with the command that measures them."""
    out, missing = [], defaultdict(list)
    for machine in machines(records):
        races_ = races(records, machine)
        for workload, scenarios in WORKLOADS.items():
            measured = [r for r in records if host_of(r) == machine and r.scenario in scenarios]
            if not any(r.status == "ok" and not r.emulated for r in measured):
                continue
            for deployment in DEPLOYMENTS:
                runs = deployment_runs(records, machine, scenarios, deployment)
                # behind the balancer without its own runs: a row where the race has a
                # candidate measured elsewhere to speak of; else the workload is unmeasured there
                elsewhere = (
                    _candidates_elsewhere(records, machine, scenarios)
                    if deployment == ALB and not runs and races_
                    else []
                )
                if runs or elsewhere:
                    out.append(
                        _recommend(records, machine, workload, deployment, runs, races_, elsewhere)
                    )
                else:
                    command = _measure_command(records, machine, scenarios, deployment)
                    missing[machine].append(f"{workload} {deployment} (`{command}`)")
    return out, dict(missing)


HEADER = ["workload", "deployment", "run", "line to paste", "evidence", "checks", "avoid"]
LEGEND = (
    "Workloads: light CPU = /plaintext, /json; database = /db, /queries, /fortunes, /updates; "
    "slow upstream = /upstream, /sleep; mix = the SaaS mix (Locust). Run: the server and its "
    "knobs, `w` workers, `t` threads per worker, `c` connections per worker, `b` listen "
    "backlog, `ka` keep-alive in s. Lines to paste: the server's declaration "
    "(servers/<id>/server.toml) with those knobs; put your app in place of app_common's and "
    "0.0.0.0 in place of 127.0.0.1 in a container. Evidence: geometric mean over trials "
    "[95 % confidence interval]; `c50 (wrk)`: 50 connections; rank by req/s among the "
    "configurations at that load, `1` = significantly ahead of every other (Welch's t-test, "
    "Holm-corrected), `1–3` = undecided; where the loads were raced (TRIALS=auto), the race's "
    'verdict instead ("Decided by racing" below). A configuration is recommended only where '
    "it leads (rank `1`, or separated from the next by the race) and holds the lead at every "
    "other load, or it won the capacity race of its machine and session (each round's "
    "capacity paired by round, separated from the next); where the race left two or more "
    "among the leaders at every load and put the rest below them at one load at least, the "
    "best of that leading group, the others named beside it: as equivalent to it where the "
    "race decided them within ±MARGIN at every load (nothing left to race), else as "
    '"not separated from" it with the command that would race them apart; baselines '
    "(nginx-static, flask-dev) never."
)


def _escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _row(rec: Recommendation) -> list[str]:
    if rec.server is None:
        run = f"{NOT_ENOUGH} `{rec.command}`"
        paste = "–"
    else:
        label = knobs_label(rec.knobs)
        if "keepalive" in rec.knobs:
            label += f" ka{rec.knobs['keepalive']}"
        run = f"**{rec.server}** {label}".strip()
        if rec.configured:
            run += f" ({rec.configured})"
        if rec.equal:
            run += f"; equivalent ({_margin(rec.equal_margin)}) to {', '.join(rec.equal)}"
        if rec.tied:
            run += f"; not separated from {', '.join(rec.tied)}"
        paste = f"`{rec.command}`"
    cells = [rec.workload, rec.deployment, run, paste, rec.evidence, rec.checks, rec.avoid]
    return [_escape(c) for c in cells]


def limits_lines(records: list[Record], checks: Checks | None = None) -> list[str]:
    """Workers as a function of a container's limits: a line per server the study measured
    (the rule where the study's checks decide, `checks`: bench.studies.sources.limit_checks;
    else the run that would), or one line to run it."""
    found = advice(records, checks)
    head = "Workers under a container's CPU and memory limits (default rule vs the limit's):"
    if not found:
        return [f"{head} {NOT_ENOUGH} `{LIMITS_RACE}`.", ""]
    return [head, "", *(f"- **{a.server}**: {_escape(a.text)}." for a in found), ""]


def recommendations_section(records: list[Record], checks: Checks | None = None) -> list[str]:
    """summary.md's first section: a table per machine, then what is not measured yet
    (`checks`: the container study's verdicts, for the worker rule under limits)."""
    recs, missing = recommendations(records)
    if not recs:
        # Only a container study's runs (no steady run to rank): its worker rule alone.
        found = limits_lines(records, checks)
        return ["## Recommendations", "", *found] if advice(records) else []
    lines = ["## Recommendations", ""]
    by_machine: dict[str, list[Recommendation]] = defaultdict(list)
    for rec in recs:
        by_machine[rec.machine].append(rec)
    for machine, rows in by_machine.items():
        lines += [f"**Machine {machine}**", ""]
        lines += [*markdown_table(HEADER, [_row(r) for r in rows], "lllllll"), ""]
        lines += limits_lines([r for r in records if host_of(r) == machine], checks)
        if missing.get(machine):
            lines += ["Not measured yet: " + "; ".join(missing[machine]) + ".", ""]
    return [*lines, LEGEND, ""]
