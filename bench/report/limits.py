"""Workers as a function of a container's limits: each server's default worker rule against
the rule that counts the limit, per set of limits, from the records that carry both.

Input: every record. Those used carry a `container` (RUNTIME=docker) and a
metadata.workers_rule (a study arm's workers knob as written: "cpus", "2*cpus+1", "quota");
records are found by what they carry, never by study or arm name. Output: per server and set
of limits (--cpus, --memory) the two rules' trials (`Pair`), what each rule measured there
(`Side`: workers, req/s and p99 with their 95 % intervals over trials, throttled time, OOM
kills, failed requests, failed runs), which rule the study's checks of that pair favour
(`Judged`), and per server the rule to use under a limit (`Advice`), or why the data do not
decide and the command that would.

One comparison, one verdict: a limit is decided by the study's own checks of that pair
(`Check`: bench.studies.verdict's outcome, the line the study's section shows, given by the
studies layer as `checks`: bench.studies.container.checks_of), never by intervals of this
module's own (a family of 5 here favoured what Holm over the study's 28 checks left
inconclusive).
- Under a CPU limit alone: the p99 check (the quota rule's p99 below the default's) and the
  req/s check (the default rule's no more than 5 % above). The rule a held check favours, or
  the other one where the engine separated the sides against it; a lower p99 for one rule and
  more req/s for the other is a trade-off, not a decision.
- Under a memory limit: the OOM kills check; a rule whose every run failed is said beside it.
- No check of the study compares a pair, or its checks are inconclusive: undecided.
- An arm that served fewer than MIN_REQUESTS requests in a trial's window (thrashing) shows
  its counts, never a figure with an interval.
- The advice: the rule every decided limit favours; several rules: "depends on the limit";
  none decided: not enough evidence.
"""

from __future__ import annotations

import textwrap
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from bench.core.outcome import Outcome
from bench.core.record import THRASH_REQUESTS, Record, thrashed
from bench.report.cells import num
from bench.report.stats import Estimate, central, estimate

RULE_QUOTA = "quota"
RUN = "make study NAME=container-limits"
# How it is asked when a server's pairs are undecided: its own arms raced (the other servers'
# arms would spend the budget on answers already given).
RACE = f"{RUN} TRIALS=auto"
NOT_ENOUGH = "not enough evidence — run:"
# Fewer requests than this in a trial's window under a memory limit (bench.core.record.
# thrashed): the arm is marked with its counts, never shown as a figure with an interval or a
# ratio (the study's results table and plot leave those windows out: bench.studies.metrics).
MIN_REQUESTS = THRASH_REQUESTS


@dataclass(frozen=True)
class Limit:
    """A container's limits as the engine was asked: --cpus and --memory (None: none)."""

    cpus: float | None
    memory_bytes: int | None

    def label(self) -> str:
        """`--cpus=0.5 --memory=160m`."""
        parts = [f"--cpus={self.cpus:g}"] if self.cpus is not None else []
        if self.memory_bytes is not None:
            mib = self.memory_bytes / 2**20
            exact = mib == int(mib)
            parts.append(f"--memory={mib:g}m" if exact else f"--memory={self.memory_bytes}b")
        return " ".join(parts) or "no limit"

    def sort_key(self) -> tuple:
        return (self.memory_bytes is not None, -(self.cpus or 0), self.memory_bytes or 0)


def rule_words(rule: str) -> str:
    """A workers rule as the section says it."""
    if rule == RULE_QUOTA:
        return "the CPU limit rounded up"
    text = rule.replace(" ", "").replace("cpus", "os.cpu_count()").replace("*", " × ")
    return text.replace("+", " + ")


@dataclass(frozen=True)
class Side:
    """One rule's trials at one limit: figures over its runs."""

    rule: str
    records: list[Record]

    @property
    def ok(self) -> list[Record]:
        return [r for r in self.records if r.status == "ok"]

    @property
    def failed(self) -> list[Record]:
        return [r for r in self.records if r.status == "failed"]

    @property
    def workers(self) -> int | None:
        found = [(r.knobs or {}).get("workers") for r in self.records]
        return next((int(w) for w in found if w is not None), None)

    def rps(self) -> list[float]:
        return [float(r.rps) for r in self.ok if r.rps]

    def p99(self) -> list[float]:
        values = [(r.latency_ms or {}).get("p99") for r in self.ok]
        return [float(v) for v in values if v]

    def throttled_ms(self) -> list[float]:
        values = [(r.container or {}).get("throttled_ms") for r in self.ok]
        return [float(v) for v in values if v is not None]

    def oom_kills(self) -> list[float]:
        """OOM kills per trial: the measured window's (ok runs) or, for a run that failed,
        those counted in its container until it ended."""
        kills = []
        for rec in self.records:
            box = rec.container or {}
            value = box.get("oom_kills") if rec.status == "ok" else box.get("oom_kills_total")
            if isinstance(value, (int, float)):
                kills.append(float(value))
        return kills

    def requests(self) -> list[int]:
        """Requests answered in each ok trial's window."""
        return [int(r.requests) for r in self.ok if r.requests is not None]

    def thin(self) -> bool:
        """Whether some ok trial thrashed (bench.core.record.thrashed: fewer than
        MIN_REQUESTS requests in its window under a memory limit): too few to measure a p99
        or a rate from."""
        return any(thrashed(r) for r in self.ok)

    def failed_pct(self) -> list[float]:
        """Requests without a 2xx answer, % of those sent, per ok run."""
        values = []
        for rec in self.ok:
            outcome = Outcome.of_record(rec)
            if outcome.arrivals:
                values.append(100 * outcome.failed / outcome.arrivals)
        return values


@dataclass(frozen=True)
class Pair:
    """The default rule and the quota rule of one server at one set of limits (one run)."""

    server: str
    limit: Limit
    default: Side
    quota: Side
    run: object = None  # the study run (or machine) the pair's trials come from


def thin_text(side: Side) -> str:
    """A thrashing arm in words, with its counts: "too few requests to measure (17, 54, 33
    requests per window; thrashing)"."""
    counts = ", ".join(f"{n:,}" for n in side.requests())
    return f"too few requests to measure ({counts} requests per window; thrashing)"


def pair_key(rec: Record) -> tuple | None:
    """(server, limits, study run) of a record of a rule under a container's limits on /db,
    or None for any other record."""
    box = rec.container or {}
    rule = rec.metadata.get("workers_rule")
    if rec.status not in ("ok", "failed") or not box or rule is None or rec.scenario != "db":
        return None
    cpus = box.get("cpus")
    memory = box.get("memory_bytes")
    limit = Limit(float(cpus) if cpus is not None else None, memory)
    run = rec.metadata.get("study_run") or rec.metadata.get("machine_id")
    return (rec.server, limit, run)


def pairs(records: list[Record]) -> list[Pair]:
    """Every server's latest pair of rules at each set of limits, in server and limit order."""
    found: dict[tuple, dict[str, list[Record]]] = defaultdict(lambda: defaultdict(list))
    for rec in records:
        key = pair_key(rec)
        if key is not None:
            found[key][str(rec.metadata["workers_rule"])].append(rec)
    latest: dict[tuple, tuple[str, object, dict[str, list[Record]]]] = {}
    for (server, limit, run), rules in found.items():
        defaults = [r for r in rules if r != RULE_QUOTA]
        if RULE_QUOTA not in rules or len(defaults) != 1:
            continue
        when = max(str(r.metadata.get("started_at", "")) for rs in rules.values() for r in rs)
        if (server, limit) not in latest or when > latest[(server, limit)][0]:
            latest[(server, limit)] = (when, run, rules)
    out = []
    for (server, limit), (_, run, rules) in latest.items():
        default = next(r for r in rules if r != RULE_QUOTA)
        quota = Side(RULE_QUOTA, rules[RULE_QUOTA])
        out.append(Pair(server, limit, Side(default, rules[default]), quota, run))
    return sorted(out, key=lambda p: (p.server, p.limit.sort_key()))


@dataclass(frozen=True)
class Check:
    """The study's verdict on one comparison of a pair (bench.studies.verdict, the line its
    section shows): its metric and kind, which rule its `a` side ran, the result word, whether
    the engine separated the two sides, and the words it rests on."""

    metric: str  # "p99_ms", "rps", "throttled_ms", "oom_kills"
    kind: str  # "less" (a below b) or "at_most" (a no more than factor × b)
    a_rule: str
    b_rule: str
    result: str  # reproduced, not reproduced, inconclusive
    separated: bool
    held: str  # holds, does not hold, inconclusive, one trial, not measured
    why: str

    def favours(self) -> str | None:
        """The rule this check's result favours: a lower p99, throttled time or OOM count
        (`less` held: a's; decided the other way, separated: b's); more req/s (`at_most`
        not held: a serves more than factor × b's, a's). None: it favours neither."""
        if self.kind == "less":
            if self.result == "reproduced":
                return self.a_rule
            return self.b_rule if self.result == "not reproduced" and self.separated else None
        if self.kind == "at_most" and self.result == "not reproduced" and self.separated:
            return self.a_rule
        return None

    def text(self) -> str:
        """`p99: holds (a/b 0.67× [0.57–0.79], …)`, as the study's line says it."""
        name = METRIC_WORDS.get(self.metric, self.metric)
        if not self.why:
            return f"{name}: {self.held}"
        tail = f": {self.why}" if self.held in ("inconclusive", "one trial") else f" ({self.why})"
        return f"{name} {self.held}{tail}"


METRIC_WORDS = {"p99_ms": "p99", "rps": "req/s", "throttled_ms": "throttled", "oom_kills": "OOM"}
# The checks that decide a limit (throttled time explains a p99, it does not favour a rule)
DECIDING = {"cpu": ("p99_ms", "rps"), "memory": ("oom_kills",)}
# (server, limits, study run) -> the study's verdicts on that pair's comparisons
Checks = Mapping[tuple[str, Limit, object], list[Check]]


@dataclass(frozen=True)
class Judged:
    """What the study's checks say at one limit: the favoured rule (None: undecided) and why."""

    pair: Pair
    favoured: str | None
    evidence: str


def _failed_note(pair: Pair) -> str:
    """Every run of a rule failed: what its first failure said (beside the verdict)."""
    for side in (pair.default, pair.quota):
        if side.records and not side.ok:
            reason = textwrap.shorten(side.failed[0].reason or "failed", 100, placeholder=" …")
            return f"every run of the {_side_name(pair, side)} rule failed ({reason}); "
    return ""


def _side_name(pair: Pair, side: Side) -> str:
    return "quota" if side is pair.quota else "default"


def judge_pair(pair: Pair, checks: Sequence[Check]) -> Judged:
    """One limit judged by the study's checks of that pair, the one verdict every renderer
    shows: under a CPU limit alone the p99 check and the req/s check (a lower p99 for one
    rule and more req/s for the other: a trade-off, no rule); under a memory limit the OOM
    kills check. No check of the study compares the pair: undecided."""
    which = "memory" if pair.limit.memory_bytes is not None else "cpu"
    deciding = [c for c in checks if c.metric in DECIDING[which]]
    note = _failed_note(pair)
    thin = [s for s in (pair.default, pair.quota) if s.thin()]
    note += "".join(f"{_side_name(pair, s)} rule: {thin_text(s)}; " for s in thin)
    if not deciding:
        return Judged(pair, None, f"{note}no check of the study compares them")
    text = note + "; ".join(c.text() for c in deciding)
    favoured = {c.favours() for c in deciding} - {None}
    if len(favoured) > 1:
        return Judged(pair, None, f"{text}: a trade-off (a lower p99 against more req/s)")
    if favoured:
        return Judged(pair, favoured.pop(), text)
    return Judged(pair, None, text)


def judge(server_pairs: list[Pair], checks: Checks | None = None) -> list[Judged]:
    """Each pair of one server judged by the study's checks of it (`checks`: the study
    engine's verdicts, bench.studies.container.limit_checks; none given: undecided)."""
    found = checks or {}
    return [judge_pair(p, found.get((p.server, p.limit, p.run), [])) for p in server_pairs]


@dataclass(frozen=True)
class Advice:
    """One server's worker rule under a container's limits, with its evidence."""

    server: str
    rule: str | None  # None: not enough evidence
    text: str
    judged: list[Judged] = field(default_factory=list)


def advice(records: list[Record], checks: Checks | None = None) -> list[Advice]:
    """Per server with pairs: the rule to use under a limit, or why the data do not decide
    (`checks`: the study's verdicts on each pair, bench.studies.container.limit_checks)."""
    by_server: dict[str, list[Pair]] = defaultdict(list)
    for pair in pairs(records):
        by_server[pair.server].append(pair)
    out = []
    for server, server_pairs in sorted(by_server.items()):
        judged = judge(server_pairs, checks)
        favoured = {j.favoured for j in judged if j.favoured is not None}
        at = "; ".join(
            f"{j.pair.limit.label()}: {_favoured_words(j)} ({j.evidence})" for j in judged
        )
        if not favoured:
            text = f"{NOT_ENOUGH} `{race_command(judged)}` ({at})"
            out.append(Advice(server, None, text, judged))
        elif len(favoured) > 1:
            text = f"depends on the limit — {at}"
            out.append(Advice(server, None, text, judged))
        else:
            rule = favoured.pop()
            least = ", at least 1" if rule == RULE_QUOTA else ""
            text = f"workers = {rule_words(rule)}{least} — {at}"
            out.append(Advice(server, rule, text, judged))
    return out


def race_command(judged: Sequence[Judged]) -> str:
    """The study race of these pairs' arms alone (ARMS=, from the records' study_arm), so
    the command decides what the row leaves undecided; the whole study's when the records
    name no arm."""
    arms = sorted(
        {
            str(r.metadata["study_arm"])
            for j in judged
            for side in (j.pair.default, j.pair.quota)
            for r in side.records
            if r.metadata.get("study_arm")
        }
    )
    return f"{RACE} ARMS={','.join(arms)}" if arms else RACE


def _favoured_words(judged: Judged) -> str:
    if judged.favoured is None:
        return "undecided"
    side = judged.pair.quota if judged.favoured == RULE_QUOTA else judged.pair.default
    plural = "s" if side.workers != 1 else ""
    return f"{side.workers} worker{plural} ({rule_words(judged.favoured)}) favoured"


def interval_text(est: Estimate | None, digits: int = 0) -> str:
    """A geometric mean with its 95 % interval over trials."""
    if est is None:
        return "–"
    if est.low is None or est.high is None:
        return f"{num(est.center, digits)} ({est.n} trial{'s' if est.n != 1 else ''})"
    return f"{num(est.center, digits)} [{num(est.low, digits)}–{num(est.high, digits)}]"


def side_cells(side: Side) -> list[str]:
    """One rule's row cells: workers, req/s and p99 with intervals (a thrashing arm: its
    request counts instead), throttled ms, OOM kills (per trial), failed requests %, failed
    runs; every figure over trials the geometric mean (the arithmetic mean where one is 0),
    the statistic of the study's results table."""
    throttled = side.throttled_ms()
    kills = side.oom_kills()
    failed = side.failed_pct()
    runs = f"{len(side.failed)} of {len(side.records)}" if side.failed else "0"
    if side.thin():
        rps = p99 = thin_text(side)
    else:
        rps = interval_text(estimate(side.rps()))
        p99 = interval_text(estimate(side.p99()), 1)
    return [
        f"{rule_words(side.rule)} ({side.workers if side.workers is not None else '?'})",
        rps,
        p99,
        num(central(throttled)) if throttled else "–",
        ", ".join(num(k) for k in kills) or "–",
        f"{central(failed):.2f}" if failed else "–",
        runs,
    ]


SIDE_HEADER = [
    "rule (workers)",
    "req/s [95 %]",
    "p99 ms [95 %]",
    "throttled ms",
    "OOM kills (each trial)",
    "failed requests %",
    "failed runs",
]
