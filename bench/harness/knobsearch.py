"""make tune's search: a server's knob space -> the best configuration, decided by racing.

Input: the space (each searched knob's values, which of them are ordered, the declared
values the search starts from), a function that measures a list of configurations once (one
round: each started and measured in the order given) and returns each one's figure, RSS or
why it failed, the race's settings (margin, objective's direction, budget, looks). Output:
an `Answer`: the best configuration, its runner-up with their ratio and interval, the
configurations equivalent to it within ±margin, the one of these with the least memory (the
recommendation), every configuration tried with why it left; and a progress line per round.

The method (docs/statistics.md, "make tune"):
- Ordered knobs first, one at a time, in the declared order (workers, then threads): from the
  smallest value, the next value races the current one (rounds of the two, judged by
  bench.report.decision); the search moves up while the next value is decided better and
  stops at the first that is not (decided equal within ±margin, worse, or still undecided
  at the race's look limit or at the end of the step's share of the budget: what is left of
  it split equally among the ordered knobs still to climb and the final race) — seed 003's
  "add workers until throughput falls". A value equal or undecided stays a candidate; one
  decided worse leaves.
- Then the final race: the climb's result, the candidates it kept, every combination of
  the unordered knobs' values with it and the declared configuration (so the answer says
  how the tuned one compares with it, on paired rounds), in rounds of those still racing
  (a configuration leaves once each adjacent pair it is in is decided), until every pair is
  decided, the looks run out or another round would end past the budget.
- Figures of one round are paired (every racing configuration measured once per round, in
  a fresh seeded random order), so all rounds any two configurations shared are evidence in
  every later comparison of the two.
- A configuration whose run failed (or whose container's kernel OOM-killed a process) is out
  at once, with that reason.
"""

from __future__ import annotations

import itertools
import math
import random
import statistics
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from bench.report import decision

Config = tuple[tuple[str, int], ...]  # knob -> value, sorted by knob


def config_of(values: dict[str, int]) -> Config:
    """A configuration from its knob values."""
    return tuple(sorted(values.items()))


def label(config: Config) -> str:
    """ "threads=8 workers=2"."""
    return " ".join(f"{k}={v}" for k, v in config)


def with_value(config: Config, knob: str, value: int) -> Config:
    """The configuration with one knob changed."""
    return config_of({**dict(config), knob: value})


@dataclass(frozen=True)
class Space:
    """What is searched: each knob's values (ascending where ordered), the ordered ones in
    the order they are climbed, the declared values the search starts from."""

    values: dict[str, tuple[int, ...]]
    ordered: tuple[str, ...]
    declared: dict[str, int]

    def start(self) -> Config:
        """The first configuration: each ordered knob at its smallest value, the others as
        declared."""
        first = {k: self.values[k][0] for k in self.ordered}
        return config_of({**self.declared, **first})

    def declared_config(self) -> Config:
        """The configuration server.toml declares (what make bench runs untuned)."""
        return config_of(self.declared)

    def grid(self, around: Config) -> list[Config]:
        """`around` with every combination of the unordered knobs' values."""
        free = [k for k in self.values if k not in self.ordered]
        combos = itertools.product(*(self.values[k] for k in free))
        return [
            config_of({**dict(around), **dict(zip(free, combo, strict=True))}) for combo in combos
        ]

    def size(self) -> int:
        """The full grid's configurations (what the climb spares)."""
        size = 1
        for values in self.values.values():
            size *= len(values)
        return size


@dataclass(frozen=True)
class Measured:
    """One configuration's run in one round: its figure, its RSS, or why it failed."""

    figure: float | None
    rss_mb: float | None = None
    failure: str | None = None


# configurations (in the order to run them), the round's number -> what each one measured
Measure = Callable[[list[Config], int], dict[Config, Measured]]


@dataclass(frozen=True)
class Settings:
    """The race's settings: margin (a fraction), direction, budget, looks, seed."""

    margin: float
    higher_is_better: bool
    budget_s: float
    max_looks: int
    seed: int = 0


@dataclass(frozen=True)
class Entry:
    """One configuration tried, against the best: its median figure and RSS, the ratio
    best/it on the rounds they shared (above 1 when the best serves more req/s, below 1 when
    its p99 is lower) with its interval, the pair's state, and why it left."""

    config: Config
    rounds: int
    figure: float | None
    rss_mb: float | None
    state: str  # best, equivalent, separated, undecided, out
    ratio: float | None = None
    low: float | None = None
    high: float | None = None
    reason: str = ""


@dataclass(frozen=True)
class Answer:
    """The search's answer."""

    best: Config
    recommended: Config  # the least memory among the best and its equivalents
    runner_up: Entry | None
    entries: tuple[Entry, ...]  # the best first, then by figure
    line: str  # the final race's standing in one line
    decided: bool  # the final race decided every adjacent pair
    why: str  # decided, limit (the looks ran out), budget, stack
    rounds: int

    def entry(self, config: Config) -> Entry:
        """The entry of one configuration."""
        return next(e for e in self.entries if e.config == config)

    @property
    def equivalent(self) -> tuple[Entry, ...]:
        """The configurations equivalent to the best within ±margin."""
        return tuple(e for e in self.entries if e.state == "equivalent")


class Stopped(Exception):
    """The search cannot go on: past the budget, or the stack died."""


@dataclass
class Search:
    """The state of one search: every figure by configuration and round, RSS, who is out."""

    settings: Settings
    measure: Measure
    say: Callable[[str], None]
    elapsed: Callable[[], float]
    figures: dict[Config, dict[int, float]] = field(default_factory=dict)
    rss: dict[Config, list[float]] = field(default_factory=dict)
    out: dict[Config, str] = field(default_factory=dict)
    left: dict[Config, str] = field(default_factory=dict)  # why a configuration stopped racing
    round_no: int = 0
    current: Config = ()  # where the climb stands
    kept: list[Config] = field(default_factory=list)  # candidates the climb kept
    contender: Config | None = None  # the next value the climb is racing
    per_config_s: float = 0.0
    why: str = ""
    rng: random.Random = field(default_factory=random.Random)

    def run_round(self, configs: list[Config]) -> None:
        """One round of `configs` in a fresh random order; failures leave at once."""
        if self.why:
            raise Stopped(self.why)
        order = [c for c in configs if c not in self.out]
        if self.elapsed() + self.per_config_s * len(order) > self.settings.budget_s:
            self.why = "budget"
            raise Stopped(self.why)
        self.rng.shuffle(order)
        self.round_no += 1
        before = self.elapsed()
        try:
            measured = self.measure(order, self.round_no)
        except Stopped as exc:  # the stack died under the round
            self.why = str(exc)
            raise
        self.per_config_s = (self.elapsed() - before) / max(1, len(order))
        for config in order:
            got = measured.get(config)
            if got is None or got.failure is not None or got.figure is None:
                self.out[config] = got.failure if got and got.failure else "no figure"
                continue
            self.figures.setdefault(config, {})[self.round_no] = got.figure
            if got.rss_mb is not None:
                self.rss.setdefault(config, []).append(got.rss_mb)

    def standing(self, configs: Iterable[Config]) -> decision.Standing:
        """The decision engine's standing of these configurations on every round they ran."""
        figures = {label(c): self.figures.get(c, {}) for c in configs if c not in self.out}
        rounds = max((len(v) for v in figures.values()), default=0)
        return decision.judge(
            figures,
            margin=self.settings.margin,
            higher_is_better=self.settings.higher_is_better,
            look=max(1, min(rounds, self.settings.max_looks)),
            max_looks=self.settings.max_looks,
        )

    def testable(self, standing: decision.Standing) -> bool:
        """Whether a round can still decide a pair: an undecided one has paired rounds left
        in the looks (past them its test spends nothing: bench.report.decision.spent)."""
        return any(
            p.state == "undecided" and p.rounds < self.settings.max_looks for p in standing.pairs
        )

    def race(
        self, configs: list[Config], what: str, deadline_s: float | None = None
    ) -> decision.Standing:
        """Rounds of the configurations still racing until each pair is decided, the looks
        run out, the budget would, or (`deadline_s`: a climb step's share of the budget, in
        seconds since the search began) another round would end past it; the progress line
        after each round."""
        by_label = {label(c): c for c in configs}
        racing = [c for c in configs if c not in self.out]
        standing = self.standing(configs)
        for _ in range(self.settings.max_looks):
            if len(racing) < 2 or standing.done or not self.testable(standing):
                break
            if (
                deadline_s is not None
                and self.round_no
                and (self.elapsed() + self.per_config_s * len(racing) > deadline_s)
            ):
                break
            self.run_round(racing)
            standing = self.standing(configs)
            racing = [by_label[n] for n in standing.racing if by_label[n] not in self.out]
            self.say(progress_line(self, what, standing, racing))
        return standing

    def step_deadline(self, knobs_left: int) -> float:
        """When a climb step must stop: now plus an equal share of what is left of the
        budget for each ordered knob still to climb (this one included) and the final race,
        so that a close pair on the first knob cannot spend the budget the others need."""
        now = self.elapsed()
        return now + (self.settings.budget_s - now) / (knobs_left + 1)

    def climb(self, knob: str, values: tuple[int, ...], knobs_left: int = 1) -> None:
        """An ordered knob, upwards from the current configuration while the next value is
        decided better, or while the current one is out (failed, or too many errors: a larger
        value may serve them); a next value equal or undecided (within its step's share of
        the budget: step_deadline) is kept as a candidate."""
        for value in values[values.index(dict(self.current)[knob]) + 1 :]:
            current = self.current
            nxt = with_value(current, knob, value)
            self.contender = nxt  # raced when the budget ends: still a candidate
            if current in self.out:
                # Nothing to race against: the smaller one failed or served too many errors
                # (above TUNE_MAX_FAILED_SHARE). The larger one may not: measured alone, and
                # the climb goes on from it (default-rule-vs-tuned's 400 connections failed
                # workers 1 and 2 and the search stopped there with no answer on the AMD
                # machine, where 5 single-threaded workers already serve 94 req/s).
                self.run_round([nxt])
                self.contender = None
                self.left.setdefault(current, f"out: {self.out[current]}")
                self.current = nxt
                continue
            standing = self.race(
                [current, nxt],
                f"{knob}: {label(current)} vs {value}",
                self.step_deadline(knobs_left),
            )
            self.contender = None
            if nxt in self.out:
                self.left[nxt] = f"out: {self.out[nxt]}"
                if current not in self.out:
                    break
            if current in self.out:  # the smaller one is out: the climb goes on past it
                self.left.setdefault(current, f"out: {self.out[current]}")
                self.current = nxt
                continue
            pair = standing.pairs[0] if standing.pairs else None
            if pair is not None and pair.state == "separated" and pair.better == label(nxt):
                self.left[current] = f"decided worse than {label(nxt)} ({knob} climb)"
                self.current = nxt
                continue
            state = pair.state if pair is not None else "undecided"
            if state == "separated":
                self.left[nxt] = f"decided worse than {label(current)} ({knob} climb)"
            else:
                self.kept.append(nxt)
            self.say(
                f"tune: {knob} stops at {dict(current)[knob]}: {value} is {_not_better(state)}"
            )
            break


def _not_better(state: str) -> str:
    return {"separated": "decided worse", "equivalent": "equal within the margin"}.get(
        state, "not decided better"
    )


def progress_line(search: Search, what: str, standing: decision.Standing, racing: list) -> str:
    """After a round: the configurations still in and the leader's interval."""
    lead = ""
    if standing.pairs:
        pair = standing.pairs[0]
        interval = (
            f" [{pair.low:.3f}, {pair.high:.3f}]" if pair.low is not None and pair.high else ""
        )
        lead = f"; leader {pair.better}: {pair.ratio:.3f}x {pair.worse}{interval}"
    still = ", ".join(label(c) for c in racing) or "none"
    return f"tune round {search.round_no} ({what}): still in: {still}{lead}"


def search(
    space: Space,
    measure: Measure,
    settings: Settings,
    say: Callable[[str], None],
    elapsed: Callable[[], float],
) -> Answer:
    """The climb over the ordered knobs, then the final race; the answer."""
    state = Search(settings, measure, say, elapsed, rng=random.Random(settings.seed))
    state.current = space.start()
    try:
        for i, knob in enumerate(space.ordered):
            state.climb(knob, space.values[knob], len(space.ordered) - i)
    except Stopped:
        if state.contender is not None:
            state.kept.append(state.contender)
    current = state.current
    # the declared configuration races too: the answer's "tuned vs declared", paired by round
    declared = space.declared_config()
    finals = list(dict.fromkeys([current, *state.kept, *space.grid(current), declared]))
    try:
        standing = state.race(finals, "final race")
    except Stopped:
        standing = state.standing(finals)
    # One candidate left for the final race: the climb decided it.
    why = state.why or ("decided" if standing.done else "limit")
    return answer(state, finals, standing, why)


def _median(values: Iterable[float] | None) -> float | None:
    values = list(values or ())
    return statistics.median(values) if values else None


def versus(
    state: Search, best: Config, other: Config, judged: decision.Pair | None = None
) -> Entry:
    """`other` against the best on the rounds they shared: `judged`, the final race's pair
    where `other` is next to the best in it (the verdict the answer's line prints, Holm over
    that race's pairs), else the two judged alone."""
    rounds = len(state.figures.get(other, {}))
    common = dict(
        figure=_median(state.figures.get(other, {}).values()),
        rss_mb=_median(state.rss.get(other)),
        reason=state.left.get(other, ""),
    )
    if other in state.out:
        return Entry(other, rounds, state="out", **common | {"reason": state.out[other]})
    pairs = [judged] if judged is not None else state.standing([best, other]).pairs
    if not pairs or not math.isfinite(pairs[0].ratio or math.nan):
        # no round shared with the best (left in the climb before the best ran): no ratio
        return Entry(other, rounds, state="undecided", **common)
    pair = pairs[0]
    ratio, low, high = pair.ratio, pair.low, pair.high
    if pair.better != label(best):  # the best of the final race is behind here: ratio < 1
        ratio, low, high = 1 / ratio, (1 / high if high else None), (1 / low if low else None)
    return Entry(other, rounds, state=pair.state, ratio=ratio, low=low, high=high, **common)


def answer(state: Search, finals: list[Config], standing: decision.Standing, why: str) -> Answer:
    """The best of the final race against every configuration tried."""
    by_label = {label(c): c for c in state.figures}
    ranked = [by_label[n] for n in standing.ranking if n in by_label]
    best = ranked[0] if ranked else finals[0]
    tried = list(dict.fromkeys([*state.figures, *state.out]))
    # the final race's pair next to the best: its verdict, not the two judged alone (the
    # answer's line and its runner-up said "?" and "equivalent" of one pair)
    final = {p.worse: p for p in standing.pairs if p.better == label(best)}
    others = [versus(state, best, c, final.get(label(c))) for c in tried if c != best]
    sign = -1 if state.settings.higher_is_better else 1
    others.sort(key=lambda e: (e.state == "out", sign * (e.figure or 0)))
    first = Entry(
        best,
        len(state.figures.get(best, {})),
        _median(state.figures.get(best, {}).values()),
        _median(state.rss.get(best)),
        "best",
    )
    paired = [e for e in others if e.ratio is not None]
    runner_up = min(paired, key=lambda e: abs(e.ratio - 1)) if paired else None  # type: ignore[operator]
    pool = [first, *(e for e in others if e.state == "equivalent")]
    line = standing.line()
    if len(standing.ranking) < 2 and runner_up is not None:  # the climb decided it
        sep = {"separated": ">", "equivalent": "="}.get(runner_up.state, "?")
        line = f"{label(best)} {sep} {label(runner_up.config)}"
    recommended = min(pool, key=lambda e: e.rss_mb if e.rss_mb is not None else float("inf"))
    return Answer(
        best,
        recommended.config,
        runner_up,
        (first, *others),
        line,
        standing.done,
        why,
        state.round_no,
    )
