"""TRIALS=auto with two or more configurations: rounds until the comparisons are decided.

Input: the harness after the plan's first rounds, the options (their Precision: budget,
margin, the looks the error is spent over), a function that runs a list of blocks. Output:
more rounds, each of the configurations still racing in a fresh random order; a progress
line with the standings after each round; the closing lines ("db c50: decided in 12 rounds,
9.4 min: granian = uwsgi (±5 %) > uvicorn > gunicorn-sync") and why the race stopped.

A configuration leaves the race once every adjacent pair it belongs to is decided, at every
point it is measured on (bench.report.standings judges each point with
bench.report.decision); the race stops when every pair is decided ("decided"), when another
round would end past BUDGET ("budget"), or at the looks the error was spent over ("limit").
With a single configuration there is nothing to race: bench.report.precision's rule (every
point's interval within ±5 %) applies instead. make capacity TRIALS=auto races the servers'
capacities the same way: a round is a trial (each search's steps around its knee on a fresh
start), each round's capacity of each server paired by round (bench.report.capacities).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, replace

from bench.core import defaults, plan
from bench.core.record import Record
from bench.report import capacities, standings


@dataclass(frozen=True)
class Outcome:
    """How a race ended: why, after how many rounds, and each point's closing line."""

    why: str  # decided, budget, limit, stack
    rounds: int
    lines: tuple[str, ...]
    undecided: tuple[str, ...]  # configurations left with an undecided pair


def stop_line(outcome: Outcome, elapsed_s: float, what: str = "race") -> str:
    """The progress line a race ends with: why it stopped, after how many rounds, how long
    its rounds took with the server starts and warm-up runs between them (the closing
    verdict's minutes run from the first measured run to the last, and read shorter: 12.2
    against 10.2 min for quota-upstream's 8 rounds, which read as a contradiction)."""
    return (
        f"TRIALS=auto: {what} stopped ({outcome.why}) after {outcome.rounds} round(s), "
        f"{elapsed_s / 60:.1f} min with server starts"
    )


def max_looks(opts: plan.Options) -> int:
    """The most rounds a race of these options can run: the rounds of two configurations that
    fit in the budget at the plan's load time alone (start-up and verification not counted,
    so no race can run more), within the trials' cap. bench.report.decision spends the error
    over these (a pair's test at n paired rounds spends α·n/max_looks in all)."""
    assert opts.precision is not None
    two = plan.make_plan(replace(opts, servers=opts.servers[:2], trials=1), warm=())
    round_s = max(1, plan.estimate_seconds(opts, two))
    if opts.mode.objective is not None:  # make capacity: a round is each search's knee steps
        steps = len(defaults.CAPACITY_KNEE) * len(opts.scenarios) * 2
        round_s = max(1, steps * (opts.warmup_s + opts.duration_s))
    rounds = min(opts.precision.max_trials, math.floor(opts.precision.budget_s / round_s))
    return max(rounds, defaults.AUTO_MIN_TRIALS)


def with_looks(opts: plan.Options) -> plan.Options:
    """The options with the race's margin (MARGIN=) and max_looks set: recorded in every
    record's trials_auto, so the summary judges as the harness did."""
    if opts.precision is None or len(opts.servers) < 2:
        return opts
    auto = replace(opts.precision, margin=opts.margin)
    return replace(
        opts, precision=replace(auto, max_looks=max_looks(replace(opts, precision=auto)))
    )


def judge(records: list[Record], looks: int) -> list[standings.PointRace]:
    """Each point's race over this invocation's records."""
    return standings.races(records, looks)


def judge_capacity(records: list[Record], looks: int) -> list[standings.PointRace]:
    """make capacity TRIALS=auto: each objective and scenario's race of the servers'
    capacities, one per round (bench.report.capacities)."""
    return capacities.point_races(records, looks)


def still_racing(found: list[standings.PointRace]) -> set[str]:
    """Configurations with an undecided pair at some point."""
    return {name for race in found for name in race.standing.racing}


def racing_spots(found: list[standings.PointRace], servers: Collection[str]) -> dict[str, set]:
    """Each server still racing and the points where it is (bench.core.plan.rounds measures
    only those): a server the screen put out at one point is not run there again. A
    configuration's label is its server id, then its knobs where one server races several."""
    out: dict[str, set] = {}
    for race in found:
        for name in race.standing.racing:
            server = name.split(" ")[0]
            if server in servers:
                out.setdefault(server, set()).add(race.spot)
    return out


def stop_reason(
    decided: bool, done: int, looks: int, next_end_s: float, budget_s: float
) -> str | None:
    """Why a race stops after `done` rounds, or None to run another: every comparison
    decided, the looks the error was spent over used up, or the next round would end (at
    `next_end_s`: now plus next_round_s) past the budget. Shared by both races."""
    if decided:
        return "decided"
    if done >= looks:
        return "limit"
    if next_end_s > budget_s:
        return "budget"
    return None


def runs_in(blocks: Iterable[plan.Block]) -> int:
    """The measured runs of a round's blocks."""
    return sum(len(block.runs) for block in blocks)


def next_round_s(spent_s: float, runs_spent: int, runs_next: int) -> float:
    """What the next round costs: the seconds a run took in the rounds behind (`spent_s` over
    `runs_spent` runs) times the runs the next round measures. A round of the configurations
    still racing is shorter than the first rounds of them all; costing it as the last round
    stopped a race of 24 study arms on its budget after the first rounds, though 2 arms were
    left to race (the recycle study: 40 min for 3 rounds)."""
    return spent_s / max(1, runs_spent) * runs_next


def race(
    opts: plan.Options,
    records: Callable[[], list[Record]],
    run_round: Callable[[list[plan.Block]], bool],
    say: Callable[[str], None],
    elapsed: Callable[[], float],
) -> Outcome:
    """Rounds after the plan's first `opts.trials`, until decided, out of budget or looks.

    `records`: this invocation's records so far; `run_round`: runs blocks, False when the
    shared stack died; `elapsed`: seconds since the measuring began."""
    settings = opts.precision
    assert settings is not None and settings.max_looks is not None
    looks = settings.max_looks
    racing: dict[str, set] | set[str] = set(opts.servers)

    def who() -> Collection[str] | dict[str, set]:
        return racing

    schedule = plan.rounds(opts, who)
    # the plan's first rounds, already run with every configuration
    spent_runs = sum(runs_in(next(schedule)) for _ in range(opts.trials))
    done = opts.trials
    spent_s = elapsed()  # what the runs behind cost (configurations leave, rounds shrink)
    judged = judge_capacity if opts.mode.objective is not None else judge
    found = judged(records(), looks)
    while True:
        standing_text = "; ".join(f"{r.point}: {r.standing.line()}" for r in found)
        if found:
            say(f"TRIALS=auto round {done}: {standing_text}")
        if not found:
            why = "nothing to race"  # no point had two configurations with figures
            break
        if opts.mode.objective is None:
            racing = racing_spots(found, opts.servers)
        else:  # a capacity search's round is its steps: every server still racing runs them
            racing = still_racing(found) & set(opts.servers)
        blocks = next(schedule)  # the servers still racing, at their points still racing
        decided = all(r.standing.done for r in found)
        ahead = next_round_s(spent_s, spent_runs, runs_in(blocks))
        why = stop_reason(decided, done, looks, elapsed() + ahead, settings.budget_s)
        if why is None and not blocks:
            why = "nothing to race"  # what is undecided has no run left to measure
        if why is not None:
            break
        before = elapsed()
        if not run_round(blocks):
            why = "stack"
            break
        spent_s, spent_runs = elapsed() - before, runs_in(blocks)
        done += 1
        found = judged(records(), looks)
    undecided = sorted(still_racing(found)) if why != "decided" else []
    lines = [text for r in found for text in (r.line(), *(f"  {n}" for n in r.notes()))]
    if undecided:
        lines.append(
            f"undecided after {done} round(s) ({why}): {', '.join(undecided)}; more rounds "
            f"would decide: {rerun_command(opts, undecided, elapsed(), done)}"
        )
    return Outcome(why, done, tuple(lines), tuple(undecided))


def rerun_command(opts: plan.Options, undecided: list[str], spent_s: float, done: int) -> str:
    """The make command that would race what is left with twice the rounds' budget."""
    assert opts.precision is not None
    per_round = spent_s / max(1, done)
    minutes = max(1, math.ceil(2 * max(spent_s, per_round * done) / 60))
    objective = opts.mode.objective
    parts = [
        "make capacity" if objective is not None else "make bench",
        f"SERVER={','.join(undecided)}",
        f"SCENARIO={','.join(opts.scenarios)}",
    ]
    if objective is not None:  # the search's objective and start; its steps' own lengths
        parts += [f"SLO_P99_MS={objective.p99_ms:g}", f"RATE={objective.start_rps}"]
    elif opts.rates:
        parts += ["LOAD=oha", f"RATE={','.join(map(str, opts.rates))}"]
    if opts.concurrency:
        parts.append(f"CONCURRENCY={','.join(map(str, opts.concurrency))}")
    parts += [
        f"DURATION={opts.duration_s}",
        "TRIALS=auto",
        f"BUDGET={min(minutes, 1_440)}",
    ]
    if opts.precision.margin != defaults.RACE_MARGIN:
        parts.append(f"MARGIN={opts.precision.margin * 100:g}")
    return " ".join(parts)


@dataclass(frozen=True)
class ArmsStanding:
    """A study's race after a round, as its judge (bench.studies) says: whether every check
    it races is decided, the arms still needed, the progress text and the closing lines."""

    done: bool
    racing: frozenset[str]  # arm ids (metadata.study_arm) of the undecided checks
    line: str
    closing: tuple[str, ...]


StudyJudge = Callable[[list[Record]], ArmsStanding]


def race_arms(
    arms: list[plan.Options],
    judge: Callable[[list[Record]], ArmsStanding],
    records: Callable[[], list[Record]],
    run_round: Callable[[list[tuple[plan.Options, plan.Block]]], bool],
    say: Callable[[str], None],
    elapsed: Callable[[], float],
) -> Outcome:
    """A study's arms (one Options each, one server each) raced: after their first
    `trials` rounds, rounds of the arms still needed, in a seeded random order, until the
    judge says every check is decided, another round would end past BUDGET, or at the looks
    the error was spent over. The same stop rules as `race`."""
    settings = arms[0].precision
    assert settings is not None and settings.max_looks is not None
    schedules = [(opts, plan.rounds(opts)) for opts in arms]
    done = arms[0].trials
    spent_runs = 0
    for _, schedule in schedules:
        for _ in range(done):
            spent_runs += runs_in(next(schedule))  # the first rounds, already run
    spent_s = elapsed()
    order = random.Random(f"study race {arms[0].seed}")
    standing = judge(records())
    while True:
        say(f"TRIALS=auto round {done}: {standing.line}")
        blocks = [
            (opts, block)
            for opts, schedule in schedules
            for block in next(schedule)
            if str(opts.study.meta.get("study_arm")) in standing.racing
        ]
        ahead = next_round_s(spent_s, spent_runs, runs_in(b for _, b in blocks))
        why = stop_reason(
            standing.done, done, settings.max_looks, elapsed() + ahead, settings.budget_s
        )
        if why is None and not blocks:
            why = "nothing to race"  # the undecided checks' arms are not in this batch
        if why is not None:
            break
        order.shuffle(blocks)
        before = elapsed()
        if not run_round(blocks):
            why = "stack"
            break
        spent_s, spent_runs = elapsed() - before, runs_in(b for _, b in blocks)
        done += 1
        standing = judge(records())
    undecided = tuple(sorted(standing.racing)) if not standing.done else ()
    return Outcome(why, done, standing.closing, undecided)
