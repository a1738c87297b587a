"""make study TRIALS=auto: a study's arms raced until its checks are decided.

Input: a validated study, the arms of one batch (one harness run), the rounds asked (TRIALS=
a number, or TRIALS=auto's Precision with BUDGET and MARGIN) and, after each round, the
batch's records so far. Output: the arms' Options with their rounds and the race's looks
(`with_rounds`, `with_looks`), and the judge bench.harness.racing.race_arms asks after each
round (`judge_for`): every check of the study whose two sides the batch measures, judged by
bench.studies.verdict (the same function the summary's section uses: the section says what
the race decided), the arms of the checks more rounds could decide, a progress line and a
closing line per check ("decided in 6 rounds: …" or "undecided: … about 40 rounds would
decide it").
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

from bench.core import defaults, plan
from bench.core.record import Record
from bench.harness.racing import ArmsStanding
from bench.studies.schema import Study
from bench.studies.sections import collapse_groups
from bench.studies.verdict import Outcome, closing_line, more_rounds_help, outcomes

Rounds = int | plan.Precision | None


def with_rounds(opts: plan.Options, rounds: Rounds) -> plan.Options:
    """An arm's Options with make study's TRIALS: the study file's (None), a fixed number,
    or TRIALS=auto's first rounds and its Precision."""
    if rounds is None:
        return opts
    if isinstance(rounds, int):
        return replace(opts, trials=rounds)
    return replace(opts, trials=rounds.min_trials, precision=rounds)


def with_looks(arms: list[plan.Options]) -> list[plan.Options]:
    """The batch's arms with the race's max_looks: the rounds of the two cheapest arms that
    fit in the budget at their load time alone (no race of this batch can run more), within
    the trials' cap; recorded in every record's trials_auto, so the summary judges as the
    race did."""
    auto = arms[0].precision if arms else None
    if auto is None:
        return arms
    costs = sorted(max(1, plan.estimate_seconds(o, next(plan.rounds(o)))) for o in arms)
    round_s = sum(costs[:2])
    looks = min(auto.max_trials, math.floor(auto.budget_s / round_s))
    looks = max(looks, defaults.AUTO_MIN_TRIALS)
    return [replace(o, precision=replace(auto, max_looks=looks)) for o in arms]


def _arms_of(study: Study, side: dict) -> set[str]:
    """The arm ids a check's side stands for: the arm, or every arm of the group it names."""
    name = str(side["arm"])
    grouped = {a.id for a in study.arms if a.settings.get("group") == name}
    return grouped or {name}


def raced_checks(study: Study, batch: set[str]) -> list[dict]:
    """The checks whose two sides this batch of arms measures."""
    return [c for c in study.checks if _arms_of(study, c["a"]) | _arms_of(study, c["b"]) <= batch]


def standing(study: Study, found: list[Outcome], rounds: int) -> ArmsStanding:
    """The race after `rounds`: done when no check could be decided by more rounds."""
    open_ = [o for o in found if more_rounds_help(o)]
    racing = set()
    for o in open_:
        racing |= _arms_of(study, o.check["a"]) | _arms_of(study, o.check["b"])
    decided = sum(o.pair is not None and o.pair.state != "undecided" for o in found)
    line = f"{decided} of {len(found)} check(s) decided"
    if open_:
        names = "; ".join(str(o.check.get("describe", o.check["metric"])) for o in open_[:3])
        line += f"; undecided: {names}" + (" …" if len(open_) > 3 else "")
    closing = tuple(f"{study.name}: {closing_line(o)}" for o in found)
    del rounds
    return ArmsStanding(not open_, frozenset(racing), line, closing)


def judge_for(study: Study, batch: set[str]) -> Callable[[list[Record]], ArmsStanding]:
    """The judge of one batch's race over this invocation's records."""
    checks = raced_checks(study, batch)

    def judge(records: list[Record]) -> ArmsStanding:
        mine = [r for r in records if r.metadata.get("study") == study.name]
        collapsed, _ = collapse_groups(study, mine)
        found = outcomes(study, collapsed, checks)
        rounds = max((r.trial for r in mine), default=0)
        return standing(study, found, rounds)

    return judge
