"""Workers as a function of a container's limits: each server's default worker rule against
the rule that counts the limit, per set of limits, from the records that carry both.

Input: every record. Those used carry a `container` (RUNTIME=docker) and a
metadata.workers_rule (a study arm's workers knob as written: "cpus", "2*cpus+1", "quota");
records are found by what they carry, never by study or arm name. Output: per server and set
of limits (--cpus, --memory) the two rules' trials (`Pair`), what each rule measured there
(`Side`: workers, req/s and p99 with their 95 % intervals over trials, throttled time, OOM
kills, failed requests, failed runs), which rule the intervals favour at that limit
(`Judged`), and per server the rule to use under a limit (`Advice`), or why the data do not
decide and the command that would.

The rules (bench.report.stats; each interval Bonferroni-corrected over the server's tests):
- Under a CPU limit alone: the quota rule is favoured where its p99 is lower (the ratio's
  interval wholly below 1) and its req/s is not lower by more than 5 % (that interval not
  wholly below 0.95); the default rule where the reverse holds (its p99 lower, or the quota
  rule's req/s more than 5 % lower) and the quota rule's p99 is not lower; both at once is a
  trade-off, not a decision. A limit that throttled neither rule in any trial decides nothing.
- Under a memory limit: the quota rule is favoured where the default rule's OOM kills exceed
  its own (the difference of means with its interval, counts have no log), or where every
  run of the default rule failed and none of the quota rule's did; where the kills do not
  decide (a limit reached without a kill: the container thrashes), p99 and req/s decide as
  under a CPU limit.
- The advice: the rule every decided limit favours; several rules: "depends on the limit";
  none decided: not enough evidence.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass, field

from bench.core.outcome import Outcome
from bench.core.record import Record
from bench.report.cells import num
from bench.report.stats import Estimate, decide, estimate, shift

RULE_QUOTA = "quota"
RUN = "make study NAME=container-limits"
NOT_ENOUGH = "not enough evidence — run:"
RPS_MARGIN = 0.95  # the quota rule may serve up to 5 % less and still be favoured on p99


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


def _key(rec: Record) -> tuple | None:
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
        key = _key(rec)
        if key is not None:
            found[key][str(rec.metadata["workers_rule"])].append(rec)
    latest: dict[tuple, tuple[str, dict[str, list[Record]]]] = {}
    for (server, limit, _run), rules in found.items():
        defaults = [r for r in rules if r != RULE_QUOTA]
        if RULE_QUOTA not in rules or len(defaults) != 1:
            continue
        when = max(str(r.metadata.get("started_at", "")) for rs in rules.values() for r in rs)
        if (server, limit) not in latest or when > latest[(server, limit)][0]:
            latest[(server, limit)] = (when, rules)
    out = []
    for (server, limit), (_, rules) in latest.items():
        default = next(r for r in rules if r != RULE_QUOTA)
        quota = Side(RULE_QUOTA, rules[RULE_QUOTA])
        out.append(Pair(server, limit, Side(default, rules[default]), quota))
    return sorted(out, key=lambda p: (p.server, p.limit.sort_key()))


@dataclass(frozen=True)
class Judged:
    """What the intervals say at one limit: the favoured rule (None: undecided) and why."""

    pair: Pair
    favoured: str | None
    evidence: str


def _ratio_text(name: str, verdict) -> str:
    diff = verdict.difference
    if diff.ratio is None:
        return f"{name} –"
    if diff.low is None or diff.high is None:
        return f"{name} {diff.ratio:.2f}× (no interval)"
    return f"{name} {diff.ratio:.2f}× [{diff.low:.2f}–{diff.high:.2f}]"


def _judge_cpu(pair: Pair, family: int, need_throttling: bool = True) -> Judged:
    """A CPU limit alone: p99 and req/s of the quota rule against the default's."""
    d, q = pair.default, pair.quota
    if min(len(d.p99()), len(q.p99())) < 2:
        return Judged(pair, None, "fewer than 2 ok trials a side: no interval")
    if need_throttling and not any(v > 0 for v in [*d.throttled_ms(), *q.throttled_ms()]):
        return Judged(pair, None, "the CPU limit did not bind (0 ms throttled in every trial)")
    p99 = decide(d.p99(), q.p99(), "lower", family=family)
    p99_up = decide(q.p99(), d.p99(), "lower", family=family)
    rps_short = decide(d.rps(), [v / RPS_MARGIN for v in q.rps()], "lower", family=family)
    text = f"{_ratio_text('p99 quota/default', p99)}, " + _ratio_text(
        "req/s quota/default", decide(d.rps(), q.rps(), "lower", family=family)
    )
    quota_better = p99.outcome == "reproduced"
    default_better = p99_up.outcome == "reproduced" or rps_short.outcome == "reproduced"
    if quota_better and rps_short.outcome == "reproduced":
        return Judged(pair, None, f"{text}: a trade-off (lower p99, less than 95 % of the req/s)")
    if quota_better:
        return Judged(pair, RULE_QUOTA, text)
    if default_better:
        return Judged(pair, d.rule, text)
    return Judged(pair, None, f"{text}: the intervals do not decide")


def _judge_memory(pair: Pair, family: int) -> Judged:
    """A memory limit: OOM kills, and whether every run of a rule failed."""
    d, q = pair.default, pair.quota
    kills = f"OOM kills {_mean(d.oom_kills())} vs {_mean(q.oom_kills())} a trial"
    if d.records and not d.ok and q.ok and not q.failed:
        reason = (d.failed[0].reason or "failed")[:100]
        return Judged(pair, RULE_QUOTA, f"every run of the default rule failed ({reason}); {kills}")
    moved = shift(d.oom_kills(), q.oom_kills(), family)
    if moved is None:
        return Judged(pair, None, f"{kills}: fewer than 2 trials a side with a count")
    text = f"{kills}, quota − default {moved.diff:+.3g} [{moved.low:+.3g}, {moved.high:+.3g}]"
    if moved.high < 0:
        return Judged(pair, RULE_QUOTA, text)
    if moved.low > 0:
        return Judged(pair, d.rule, text)
    if min(len(d.p99()), len(q.p99())) >= 2:
        # No kill to tell them apart (a limit reached without a kill thrashes: the code's
        # pages evicted and read again): what the load saw decides, as under a CPU limit.
        served = _judge_cpu(pair, family, need_throttling=False)
        return Judged(pair, served.favoured, f"{text}; {served.evidence}")
    return Judged(pair, None, f"{text}: the interval contains 0")


def _mean(values: list[float]) -> str:
    if not values:
        return "–"
    return num(statistics.mean(values), 1)


def judge(server_pairs: list[Pair]) -> list[Judged]:
    """Each pair of one server judged, the intervals corrected over the server's tests (two
    at a CPU limit, one at a memory limit)."""
    family = sum(1 if p.limit.memory_bytes is not None else 2 for p in server_pairs) or 1
    return [
        _judge_memory(p, family) if p.limit.memory_bytes is not None else _judge_cpu(p, family)
        for p in server_pairs
    ]


@dataclass(frozen=True)
class Advice:
    """One server's worker rule under a container's limits, with its evidence."""

    server: str
    rule: str | None  # None: not enough evidence
    text: str
    judged: list[Judged] = field(default_factory=list)


def advice(records: list[Record]) -> list[Advice]:
    """Per server with pairs: the rule to use under a limit, or why the data do not decide."""
    by_server: dict[str, list[Pair]] = defaultdict(list)
    for pair in pairs(records):
        by_server[pair.server].append(pair)
    out = []
    for server, server_pairs in sorted(by_server.items()):
        judged = judge(server_pairs)
        favoured = {j.favoured for j in judged if j.favoured is not None}
        at = "; ".join(
            f"{j.pair.limit.label()}: {_favoured_words(j)} ({j.evidence})" for j in judged
        )
        if not favoured:
            out.append(Advice(server, None, f"{NOT_ENOUGH} `{RUN}` ({at})", judged))
        elif len(favoured) > 1:
            text = f"depends on the limit — {at}"
            out.append(Advice(server, None, text, judged))
        else:
            rule = favoured.pop()
            least = ", at least 1" if rule == RULE_QUOTA else ""
            text = f"workers = {rule_words(rule)}{least} — {at}"
            out.append(Advice(server, rule, text, judged))
    return out


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
    """One rule's row cells: workers, req/s and p99 with intervals, throttled ms (median),
    OOM kills (per trial), failed requests % (median), failed runs."""
    throttled = side.throttled_ms()
    kills = side.oom_kills()
    failed = side.failed_pct()
    runs = f"{len(side.failed)} of {len(side.records)}" if side.failed else "0"
    return [
        f"{rule_words(side.rule)} ({side.workers if side.workers is not None else '?'})",
        interval_text(estimate(side.rps())),
        interval_text(estimate(side.p99()), 1),
        num(statistics.median(throttled)) if throttled else "–",
        ", ".join(num(k) for k in kills) or "–",
        f"{statistics.median(failed):.2f}" if failed else "–",
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
