"""Capacity at a latency objective: per server and scenario, the highest offered rate at
which p99 stays within the objective, no request fails and the offered rate is served; then
what a user sees below it (50 %, 80 %) and past it (120 %, 150 %).

Input: a Session on a started server (open-loop load tool), the block's runs (one per
scenario: the template of each search) and Options.objective. Output: one record per step,
each with metadata.capacity {search, objective, phase, step, passed, why} and, on the step
that confirms it, result_rps. The search is a step-up (doubling from the start rate), then a
bisection to within the objective's precision, then a confirming repeat; then repeated
"knee" steps at rates around the result (defaults.CAPACITY_KNEE, CAPACITY_KNEE_TRIALS each,
shuffled per round; a round whose steps all passed, or all failed, steps on past them until
one turns), from which the report fits the capacity with its interval; bounded by
the objective's time budget per server and scenario. Search is pure: tested without a server.
"""

from __future__ import annotations

import dataclasses
import random
import time
import uuid
from dataclasses import dataclass, field

from bench.core import defaults, plan
from bench.core.outcome import Outcome
from bench.harness.measure import Measurement
from bench.harness.session import Session

SEARCH_PHASES = ("step-up", "step-down", "bisect", "confirm")


@dataclass
class Search:
    """Which rate to try next, given which passed and which failed."""

    start: int
    precision: float
    passes: list[int] = field(default_factory=list)
    failed: int | None = None  # the lowest rate that failed
    result: int | None = None  # confirmed capacity
    done: bool = False

    @property
    def passed(self) -> int | None:
        """The highest rate that passed below the lowest that failed."""
        below = [p for p in self.passes if self.failed is None or p < self.failed]
        return max(below) if below else None

    def next(self) -> tuple[int, str] | None:
        """(rate, phase) of the next step, or None when the search is over."""
        if self.done:
            return None
        passed, failed = self.passed, self.failed
        if failed is None:
            return (self.start if passed is None else passed * 2), "step-up"
        if passed is None:
            rate = failed // 2
            return (rate, "step-down") if rate >= 1 else None
        mid = (passed + failed) // 2
        if (failed - passed) / passed > self.precision and passed < mid < failed:
            return mid, "bisect"
        return passed, "confirm"

    def observe(self, rate: int, phase: str, ok: bool) -> None:
        """Take a step's verdict."""
        if ok:
            self.passes.append(rate)
            if phase == "confirm":
                self.result, self.done = rate, True
            return
        # A failed confirmation makes the rate a failing one: search below it again.
        self.failed = rate if self.failed is None else min(self.failed, rate)
        self.passes = [p for p in self.passes if p < rate]
        if phase == "step-down" and rate <= 1:
            self.done = True


def verdict(measured: Measurement | None, rate: int, objective: plan.Objective) -> tuple[bool, str]:
    """Whether a step meets the objective, and why not."""
    if measured is None:
        return False, "the load tool failed (see the record)"
    result, errors = measured.result, measured.result.errors
    failed = Outcome.of(result.requests, errors.to_dict()).failed
    if failed:
        return False, f"{failed} failed requests"
    achieved = result.achieved_rps or 0.0
    if achieved < objective.min_achieved * rate:
        return False, f"served {achieved:,.0f} of {rate:,} req/s"
    p99, p999 = result.latency.p99, result.latency.p999
    if p99 is None or p99 > objective.p99_ms:
        return False, f"p99 {p99} ms > {objective.p99_ms:g} ms"
    if objective.p999_ms is not None and (p999 is None or p999 > objective.p999_ms):
        return False, f"p99.9 {p999} ms > {objective.p999_ms:g} ms"
    return True, "within the objective"


def _step(
    session: Session,
    template: plan.RunSpec,
    rate: int,
    phase: str,
    number: int,
    search_id: str,
) -> bool:
    """Measure one step at `rate` and record it with its verdict; whether it passed."""
    objective = session.opts.mode.objective
    assert objective is not None
    pool = session.opts.concurrency[0] if session.opts.concurrency else plan.pool_for(rate)
    run = dataclasses.replace(template, rate=rate, concurrency=pool)
    outcome: dict[str, object] = {}

    def judge(measured: Measurement | None) -> dict:
        ok, why = verdict(measured, rate, objective)
        outcome["ok"] = ok
        capacity = {
            "search": search_id,
            "objective": objective.to_dict(),
            "phase": phase,
            "step": number,
            "passed": ok,
            "why": why,
        }
        if phase == "confirm" and ok:
            capacity["result_rps"] = rate
        return {"capacity": capacity}

    session.measure(run, judge=judge)
    return bool(outcome.get("ok"))


def knee_ladder(found: int, seed: int, rounds: int) -> list[list[int]]:
    """The repeated rates around a search's result, one round per trial, each round in its own
    shuffled order (a drift through the session then spreads over every rate instead of
    biasing one)."""
    rates = sorted({max(1, round(found * f)) for f in defaults.CAPACITY_KNEE})
    rng = random.Random(seed)
    return [rng.sample(rates, len(rates)) for _ in range(rounds)]


@dataclass
class Knee:
    """A search's result, carried from the trial that searched to the later trials (each on a
    fresh start of the server) that repeat the steps around it."""

    search_id: str
    found: int
    ladder: list[list[int]]
    number: int  # the last step's number: later steps go on counting


def knee_round(knee: Knee, trial: int) -> list[int]:
    """Trial `trial`'s round of steps around the result: the ladder's row for the planned
    trials; past them (TRIALS=auto's race rounds) a row shuffled afresh for that trial."""
    if trial <= len(knee.ladder):
        return knee.ladder[trial - 1]
    return knee_ladder(knee.found, int(knee.search_id, 16) + trial, 1)[0]


def _search(session: Session, template: plan.RunSpec, deadline: float) -> Knee | None:
    """Step up, bisect, confirm: the search's result with its id, or None (not found)."""
    objective = session.opts.mode.objective
    assert objective is not None
    search = Search(objective.start_rps, objective.precision)
    search_id = uuid.uuid4().hex[:12]
    number = 0
    while (step := search.next()) is not None and time.monotonic() < deadline:
        rate, phase = step
        number += 1
        search.observe(rate, phase, _step(session, template, rate, phase, number, search_id))
    if search.result is None:
        return None
    rounds = max(1, session.opts.trials)
    ladder = knee_ladder(search.result, int(search_id, 16), rounds)
    return Knee(search_id, search.result, ladder, number)


def _steps(
    session: Session, template: plan.RunSpec, knee: Knee, extra, deadline: float
) -> dict[int, bool]:
    """Measure (phase, rate) steps of a search until the list or the budget ends; each
    measured rate's verdict."""
    verdicts: dict[int, bool] = {}
    for phase, rate in extra:
        if time.monotonic() >= deadline:
            break
        knee.number += 1
        verdicts[rate] = _step(session, template, rate, phase, knee.number, knee.search_id)
    return verdicts


KNEE_REACH = 4  # steps at most past a round's ladder when all of it passed (or failed)


def _reach(
    session: Session, template: plan.RunSpec, knee: Knee, verdicts: dict[int, bool], deadline: float
) -> None:
    """A round whose knee steps all passed (or all failed) has no crossing of its own, so a
    race could not compare it (bench.report.capacities; a make capacity TRIALS=auto run on
    this machine: trial 1's search, under foreign load, found 4,000 req/s for granian and
    every step of trials 2 and 3 passed): step on past its highest rate by the ladder's top
    factor (below its lowest by its bottom one) until a step's verdict turns, at most
    KNEE_REACH steps, within the budget."""
    if not verdicts or len(set(verdicts.values())) != 1:
        return
    passed = next(iter(verdicts.values()))
    factor = max(defaults.CAPACITY_KNEE) if passed else min(defaults.CAPACITY_KNEE)
    rate = max(verdicts) if passed else min(verdicts)
    for _ in range(KNEE_REACH):
        rate = max(1, round(rate * factor))
        if time.monotonic() >= deadline or (rate == 1 and not passed):
            return
        knee.number += 1
        if _step(session, template, rate, "knee", knee.number, knee.search_id) != passed:
            return


def search_one(session: Session, template: plan.RunSpec, trial: int, knees: dict) -> int | None:
    """Trial 1 searches the capacity; every trial (each a fresh start of the server) then runs
    its round of steps around the result, and the last planned one (TRIALS, or TRIALS=auto's
    first rounds) the steps below and past it. The report's capacity is the crossing over
    every step of the search, across trials; a race compares each trial's own crossing
    (bench.report.capacities)."""
    objective = session.opts.mode.objective
    assert objective is not None
    deadline = time.monotonic() + objective.budget_s
    key = (template.server, tuple(sorted(session.facts.knobs.items())), template.scenario)
    knee = knees.get(key)
    if knee is None:
        if trial > 1 or (knee := _search(session, template, deadline)) is None:
            return None  # no search result (trial 1 found none): nothing to repeat
        knees[key] = knee
    steps = [("knee", r) for r in knee_round(knee, trial)]
    _reach(session, template, knee, _steps(session, template, knee, steps, deadline), deadline)
    if trial == len(knee.ladder):
        extra = [("profile", max(1, round(knee.found * f))) for f in defaults.CAPACITY_PROFILE]
        extra += [("past", max(1, round(knee.found * f))) for f in defaults.CAPACITY_PAST]
        _steps(session, template, knee, extra, deadline)
    return knee.found


def search_capacity(
    session: Session, runs: tuple[plan.RunSpec, ...], trial: int = 1, knees: dict | None = None
) -> None:
    """Each scenario's capacity on this server (one search per scenario in the block); `knees`
    carries trial 1's results to the later trials of the same invocation."""
    knees = {} if knees is None else knees
    seen: set[str] = set()
    for template in runs:
        if template.scenario in seen:
            continue
        seen.add(template.scenario)
        found = search_one(session, template, trial, knees)
        label = f"{found:,} req/s" if found is not None else "not found within the budget"
        what = "capacity" if trial == 1 else f"trial {trial}, steps around"
        session.h.progress.say(f"{template.server} {template.scenario}: {what} {label}")
