"""A study's verdict: each [[check]] decided by the race engine on its two arms' rounds.

Input: a study's checks and its records of one run (a record is a trial; a trial number is a
round: the arms ran interleaved, round by round). Output: per check an Outcome
(`reproduced`, `not reproduced` or `inconclusive` with the reason, how it held, the line the
section shows) and the verdict over them: `reproduced`, `partly reproduced`, `not
reproduced`, `inconclusive`, or `one trial: cannot decide`.

Every check of a study is one Question of bench.report.decision.judge_family, the engine
TRIALS=auto races on: the within-round ln ratios a/b of its two arms (paired by round),
"separated" (two-sided t) or "equivalent within ±MARGIN" (TOST), a ratio check within its
band (TOST on ln(a/b / published) within ±ln(band)) or outside it; Holm's step-down over the
study's checks (those not testable count in the family); the error spent over the looks when
the study was raced (TRIALS=auto: metadata.trials_auto). A figure that can be 0 has no log:
counts (502s, failed requests, OOM kills: bench.studies.metrics.COUNT_METRICS) are decided by
an exact test on the events and what they are out of (decision.count_p, the function the
recommendations use for the keep-alive race), other zero figures on the paired differences
on their own scale. One trial decides nothing; nor a comparison under a CPU quota that
throttled neither arm.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace

from bench.core import defaults
from bench.core.record import Record
from bench.report import decision
from bench.report.cells import figure
from bench.report.groups import starved
from bench.report.production import quota_bound
from bench.report.stats import central
from bench.studies.metrics import COUNT_METRICS, count_of, counted, fraction_rates, metric_value
from bench.studies.schema import Study
from bench.studies.tunespec import as_judged

ONE_TRIAL = "one trial: cannot decide"
# Latency figures: a closed-loop arm that left connections unserved times only those it served
LATENCY_METRICS = ("mean_s", "mean_ms", "p50_ms", "p90_ms", "p99_ms", "p999_ms")


@dataclass(frozen=True)
class Outcome:
    """One check judged: its result word and the line the section shows."""

    check: dict
    result: str  # reproduced, not reproduced, inconclusive
    line: str
    held: str  # "holds", "does not hold", "within", "outside", "inconclusive", "not measured"
    pair: decision.Pair | None = None  # the engine's judgement (None: not testable)
    head: str = ""  # published vs ours, or the two sides' figures (the line's middle)
    why: str = ""  # the interval it rests on, or why it is undecided (the line's tail)


def side_records(
    records: list[Record], side: dict, rates: dict[tuple[str, str], float], metric: str = ""
) -> list[Record] | None:
    """The ok records (trials) of a check's side (and failed ones for a metric counted on
    them: OOM kills); None when its fraction's rate was never derived (the second phase did
    not run)."""
    rate = None
    if "fraction" in side:
        rate = rates.get((side["arm"], f"{side['fraction']:g}"))
        if rate is None:
            return None
    return [
        r
        for r in records
        if counted(r, metric or "")
        and str(r.metadata.get("study_arm")) == side["arm"]
        and ("concurrency" not in side or r.concurrency == side["concurrency"])
        and ("scenario" not in side or r.scenario == side["scenario"])
        and (rate is None or r.offered_rps == rate)
    ]


def trial_values(recs: list[Record], metric: str) -> list[float]:
    """One value per trial (record) that measured the metric."""
    values = (metric_value(r, metric) for r in recs)
    return [float(v) for v in values if v is not None]


def by_round(recs: list[Record], metric: str) -> dict[int, float]:
    """Round (trial number) -> the side's figure in it: the geometric mean of its records
    there (several only where a run was split or repeated), the mean where one is 0."""
    values: dict[int, list[float]] = defaultdict(list)
    for rec in recs:
        value = metric_value(rec, metric)
        if value is not None and rec.trial > 0:
            values[rec.trial].append(float(value))
    return {
        r: statistics.geometric_mean(v) if min(v) > 0 else statistics.fmean(v)
        for r, v in values.items()
    }


def counts_by_round(recs: list[Record], metric: str) -> dict[int, tuple[int, float]]:
    """Round -> (events, exposure) of a count metric, summed over its records there."""
    sums: dict[int, list[float]] = defaultdict(lambda: [0, 0.0])
    for rec in recs:
        found = count_of(rec, metric)
        if found is not None and rec.trial > 0:
            sums[rec.trial][0] += found[0]
            sums[rec.trial][1] += found[1]
    return {r: (int(e), float(n)) for r, (e, n) in sums.items()}


def _cells(recs: list[Record]) -> int:
    return len({(r.scenario, r.concurrency, r.offered_rps) for r in recs})


def quota_unbound(recs: list[Record]) -> str | None:
    """Why a comparison under a CPU quota says nothing about the quota: it throttled neither
    arm in any trial (None: no quota, it bound somewhere, or the arms are under a memory
    limit, which is then what they compare)."""
    if any((r.container or {}).get("memory_bytes") is not None for r in recs):
        return None  # under a memory limit the memory limit is what is compared
    bound = [quota_bound(r) for r in recs]
    if not any(b is not None for b in bound) or any(bound):
        return None
    return "the CPU quota did not bind (0 ms throttled in every trial of both arms)"


def settings_of(records: list[Record]) -> tuple[float, int | None]:
    """The margin and the looks a study's run was raced with (TRIALS=auto's, in its records'
    metadata.trials_auto); a fixed-trial run: the default margin and one look (None)."""
    raced = [r.metadata["trials_auto"] for r in records if r.metadata.get("trials_auto")]
    if not raced:
        return defaults.RACE_MARGIN, None
    margin = float(raced[0].get("margin") or defaults.RACE_MARGIN)
    looks = raced[0].get("max_looks")
    return margin, int(looks) if looks else None


def question(check: dict, records: list[Record], margin: float) -> decision.Question | str:
    """A check as the engine's Question (with the looks its arms were raced over), or why it
    cannot be one."""
    found = _question(check, records, margin)
    if isinstance(found, str):
        return found
    rates = fraction_rates(records)
    mine = side_records(records, check["a"], rates, check["metric"]) or []
    return replace(found, looks=settings_of(mine)[1])


def _question(check: dict, records: list[Record], margin: float) -> decision.Question | str:
    """A check as the engine's Question, or why it cannot be one (the reason it is
    inconclusive: not measured, several cells, a quota that never bound, one trial)."""
    rates = fraction_rates(records)
    metric = check["metric"]
    sides = [side_records(records, check[s], rates, metric) or [] for s in ("a", "b")]
    if not all(trial_values(s, metric) for s in sides):
        return "not measured"
    if max(_cells(s) for s in sides) > 1:
        return "a side names several cells: give its concurrency"
    unbound = quota_unbound([*sides[0], *sides[1]])
    if unbound:
        return unbound
    apart = [check[s]["arm"] for s, recs in zip("ab", sides, strict=True) if starved(recs)]
    if metric in LATENCY_METRICS and apart:
        # uwsgi serving 16 % of its 50 connections has a p99 of 1.7 ms: of the requests it
        # accepted (bench.report.groups.starved); its latency is not comparable
        return (
            f"{', '.join(apart)} left connections unserved (under half served, by Little's "
            "law): its latency times only the requests it accepted"
        )
    factor = float(check.get("factor", 1)) if check["kind"] == "at_most" else 1.0
    if metric in COUNT_METRICS and check["kind"] != "ratio":
        a, b = (counts_by_round(s, metric) for s in sides)
        common = sorted(set(a) & set(b))
        if len(common) < 2:
            return ONE_TRIAL
        counts = {r: (*a[r], *b[r]) for r in common}
        # at_most with margin_pct: a's rate at most b's + that many % of the arrivals
        tolerated = check.get("margin_pct")
        return decision.Question(
            "a",
            "b",
            counts=counts,
            offset=factor,
            binomial=metric != "oom_kills",
            count_margin=float(tolerated) / 100 if tolerated is not None else None,
        )
    a, b = (by_round(s, metric) for s in sides)
    common = sorted(set(a) & set(b))
    if len(common) < 2:
        return ONE_TRIAL
    pairs = {r: (a[r], b[r]) for r in common}
    if check["kind"] == "ratio":
        band = float(check.get("band", 2.0)) - 1
        return decision.Question(
            "a", "b", pairs, offset=float(check["published"]), margin=band, band=True
        )
    return decision.Question("a", "b", pairs, offset=factor, margin=margin)


def _below(pair: decision.Pair) -> bool:
    """Whether a lies below b (× its factor) on the pair's scale."""
    if pair.scale == "linear":
        return pair.ratio < 0
    if pair.scale == "count":
        return pair.ratio < 1
    return pair.ratio < pair.offset


def result_of(check: dict, pair: decision.Pair) -> str:
    """The check's result word from the engine's state: less holds where a is separated
    below b (equivalent within the margin: not less); at_most where a is below or
    equivalent; a ratio where it is equivalent to the published one within the band."""
    if pair.state == "undecided":
        return "inconclusive"
    if check["kind"] == "ratio":
        return "reproduced" if pair.state == "equivalent" else "not reproduced"
    if pair.state == "equivalent":
        return "reproduced" if check["kind"] == "at_most" else "not reproduced"
    return "reproduced" if _below(pair) else "not reproduced"


def _count_text(q: decision.Question) -> str:
    assert q.counts is not None
    ea = sum(c[0] for c in q.counts.values())
    na = sum(c[1] for c in q.counts.values())
    eb = sum(c[2] for c in q.counts.values())
    nb = sum(c[3] for c in q.counts.values())
    if not q.binomial:
        return f"{ea:,} vs {eb:,} over {len(q.counts)} rounds"
    return f"{ea:,} in {na:,.0f} vs {eb:,} in {nb:,.0f}"


def reason_text(check: dict, q: decision.Question, pair: decision.Pair, family: int) -> str:
    """What the check rests on: the ratio (or difference, or counts) with its interval, the
    rounds, the family; and for an undecided one why, and what would decide it."""
    rounds = f"{pair.rounds} round{'s' if pair.rounds != 1 else ''}"
    holm = f"Holm over {family} check{'s' if family != 1 else ''}"
    factor = f" × {pair.offset:g}" if pair.offset != 1 and check["kind"] != "ratio" else ""
    if pair.scale == "count":
        # within the margin: the p of that test (the difference's is ~1 there)
        shown = pair.p_equivalent if pair.state == "equivalent" else pair.p
        p = f", adjusted p = {shown:.3f}" if shown is not None else ""
        text = f"{_count_text(q)}, exact test{p}, {holm}"
    elif pair.scale == "linear" and pair.low is not None:
        text = (
            f"a − b{factor} {pair.ratio:+.3g} [{pair.low:+.3g}, {pair.high:+.3g}], {rounds} "
            f"paired, {holm}"
        )
    elif pair.low is not None:
        ratio = decision.ratio_interval(pair.ratio, pair.low, pair.high, _x)
        # an equivalence is decided on TOST's 1 − 2α′ interval: say which one is shown
        level = f" ({pair.level_text()})" if pair.state == "equivalent" else ""
        text = f"a/b {ratio}{level}, {rounds} paired, {holm}"
    else:
        text = f"{rounds} paired, {holm}"
    if pair.state == "equivalent" and pair.scale == "count":
        text += f": a at most b + {pair.margin * 100:g} % of the arrivals (one-sided score test)"
    elif pair.state == "equivalent" and check["kind"] != "ratio":
        text += f": a = b{factor} within {decision.margin_text(pair.margin)}"
    if pair.state != "undecided":
        return text
    text += f": {pair.reason}"
    needed = decision.rounds_to_decide(pair, pair.margin)
    if needed is not None and needed > pair.rounds:
        text += f"; about {needed} rounds would decide it"
    return text


def _x(ratio: float | None) -> str:
    """A ratio with two decimals, or two significant digits below 0.1 (0.0004×, not 0.00×)."""
    if ratio is None:
        return "–"
    return f"{ratio:.2f}" if ratio >= 0.1 else f"{ratio:.2g}"


HELD = {
    "less": {"reproduced": "holds", "not reproduced": "does not hold"},
    "at_most": {"reproduced": "holds", "not reproduced": "does not hold"},
    "ratio": {"reproduced": "within", "not reproduced": "outside"},
}
# "tuned" checks are judged as `less` or `at_most` (bench.studies.tunespec.as_judged).


def _head(check: dict, records: list[Record]) -> str:
    """Published vs ours (a ratio check), or the two sides' figures over trials (the geometric
    mean, bench.report.stats.central, as the results table says each arm)."""
    rates = fraction_rates(records)
    metric = check["metric"]
    a, b = (
        trial_values(side_records(records, check[s], rates, metric) or [], metric) for s in "ab"
    )
    med_a, med_b = central(a), central(b)
    if check["kind"] == "ratio":
        return _published_head(check, med_a / med_b if med_b else None)
    return f"{figure(med_a)} vs {figure(med_b)}"


def _published_head(check: dict, ours: float | None) -> str:
    """A ratio check's head: the published ratio and ours, with the band it is allowed."""
    published, band = float(check["published"]), float(check.get("band", 2.0))
    shown = f"ours {ours:.2f}×" if ours is not None else "ours –"
    return f"published {published:.2f}×, {shown} (a factor {band:g} allowed)"


def outcomes(
    study: Study, records: list[Record], checks: Sequence[dict] | None = None
) -> list[Outcome]:
    """Every check of `checks` (default: the study's) judged in one family: the study's
    checks (bench.report.decision.judge_family), in the order given."""
    return judge_checks(
        list(study.checks if checks is None else checks), records, len(study.checks)
    )


def unmeasured(check: dict, records: list[Record]) -> str:
    """Why a check has no figure on one of its sides, arm by arm: no record at all (the arm
    was not run in this session: added to the study after its question was asked, or the run
    was cut short), only failed runs, or ok runs without that metric."""
    rates = fraction_rates(records)
    reasons: dict[str, None] = {}
    for side in (check["a"], check["b"]):
        arm, metric = side["arm"], check["metric"]
        mine = [r for r in records if str(r.metadata.get("study_arm")) == arm]
        if not mine:
            reasons[f"arm {arm} has no record: not run in this session"] = None
        elif not any(r.status == "ok" for r in mine):
            reasons[f"arm {arm}'s runs failed"] = None
        elif not trial_values(side_records(records, side, rates, metric) or [], metric):
            reasons[f"arm {arm} has no sample of {metric}"] = None
    return "; ".join(reasons) or "a run failed or had no samples"


def judge_checks(checks: list[dict], records: list[Record], family: int) -> list[Outcome]:
    """The checks judged together, Holm over `family` (at least len(checks))."""
    margin, looks = settings_of(records)
    asked = [question(as_judged(c), records, margin) for c in checks]
    questions = [q for q in asked if isinstance(q, decision.Question)]
    pairs = iter(decision.judge_family(questions, max_looks=looks, family=max(family, len(checks))))
    out = []
    for check, q in zip(checks, asked, strict=True):
        what = check.get("describe", f"{check['metric']} {check['a']} vs {check['b']}")
        if q == "not measured":
            why = f"not measured ({unmeasured(check, records)})"
            line = f"- {what}: {why} — inconclusive"
            out.append(Outcome(check, "inconclusive", line, "not measured", why=why))
            continue
        head = _head(check, records)  # a tuned check: the tuned arm's figure first
        if isinstance(q, str):
            held = "one trial" if q == ONE_TRIAL else "inconclusive"
            line = f"- {what}: {head} — inconclusive: {q}"
            out.append(Outcome(check, "inconclusive", line, held, head=head, why=q))
            continue
        pair = next(pairs)
        judged = as_judged(check)
        finite = math.isfinite(pair.ratio or math.nan)
        if judged["kind"] == "ratio" and pair.scale == "log" and finite:
            # ours is the ratio judged, paired by round: the sides' own means over unequal
            # rounds (a raced arm runs more) said 1.04× beside its a/b 0.98× [0.79–1.20]
            head = _published_head(check, pair.ratio)
        result = result_of(judged, pair)
        held = HELD[judged["kind"]].get(result, "inconclusive")
        reason = reason_text(judged, q, pair, max(family, len(checks)))
        if judged.get("swapped"):  # a tuned check judged the other way round: its a is b here
            reason = reason.replace("a/b ", "b/a ", 1).replace("a − b", "b − a", 1)
        tail = f": {reason}" if held == "inconclusive" else f" ({reason})"
        line = f"- {what}: {head} — {held}{tail}"
        out.append(Outcome(check, result, line, held, pair, head, reason))
    return out


def outcome(check: dict, records: list[Record], family: int = 1) -> Outcome:
    """One check judged on a run's records, in a family of `family` checks."""
    return judge_checks([check], records, family)[0]


def verdict(found: Sequence[Outcome]) -> str:
    """The verdict over checks: reproduced / not reproduced when every check is; partly
    reproduced when checks were decided both ways; "one trial: cannot decide" when every
    check measured had one trial (a check its records cannot measure, such as late arrivals
    before format 16, adds no evidence either way); otherwise inconclusive."""
    results = {o.result for o in found}
    measured = [o for o in found if o.held != "not measured"]
    if measured and all(o.held == "one trial" for o in measured):
        return ONE_TRIAL
    if results == {"reproduced"}:
        return "reproduced"
    if results == {"not reproduced"}:
        return "not reproduced"
    if {"reproduced", "not reproduced"} <= results:
        return "partly reproduced"
    return "inconclusive"


def tally(found: Sequence[Outcome]) -> str:
    """How the checks came out: `2 reproduced, 1 inconclusive`."""
    words = ("reproduced", "not reproduced", "inconclusive")
    counts = [(sum(o.result == w for o in found), w) for w in words]
    return ", ".join(f"{n} {w}" for n, w in counts if n)


def judge(
    study: Study, records: list[Record], checks: Sequence[dict] | None = None
) -> tuple[str, list[str]]:
    """The verdict word and a line per check (what was compared, published vs ours, the
    interval or why there is none), over `checks` (default: every check of the study); the
    family is always the study's checks."""
    found = outcomes(study, records, checks)
    return verdict(found), [o.line for o in found]


def closing_line(o: Outcome) -> str:
    """A raced check's closing line: "decided in 6 rounds: <check> holds (…)" or
    "undecided: <check> … about 40 rounds would decide it"."""
    what = o.check.get("describe", o.check["metric"])
    text = o.line.removeprefix(f"- {what}: ")
    if o.pair is not None and o.pair.state != "undecided":
        return f"decided in {o.pair.rounds} rounds: {what}: {text}"
    return f"undecided: {what}: {text}"


def more_rounds_help(o: Outcome) -> bool:
    """Whether more rounds could decide a check: one trial so far, too few paired rounds, or
    tested and still neither separated nor equivalent (not: an arm not measured, a quota that
    never bound, a zero with no ratio, figures alike every round, no event on either side)."""
    if o.held == "one trial":
        return True
    pair = o.pair
    if pair is None or pair.state != "undecided":
        return False
    return pair.p is not None or "paired round(s)" in pair.reason
