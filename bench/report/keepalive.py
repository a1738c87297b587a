"""The keep-alive race's one decision: per machine and server, whether the documented fix
(keep-alive above the balancer's idle timeout) lowered the 502 rate behind the ALB-like front.

Input: every record; those of the lb-keepalive-race study carrying `network.race` count, per
arm its latest run (`<what>-default`: the server as shipped, `<what>-fix`: keep-alive above
60 s). Output: a `Fix` per (machine, server) with a default arm: the two arms' 502s and
requests sent, and the engine's judgement (bench.report.decision.judge_family on a count
question: an exact test, Fisher's, two-sided as twice the smaller one-sided p, Holm over
the servers with both arms). The study's section (bench.studies.network) and the
recommendations (bench.report.recommend) both read this, so the pasted keep-alive line and
the study's verdict never disagree. A fix arm measured on another machine than the default
is not paired with it (records of two hosts are never one comparison).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scipy import stats

from bench.core.record import Record, latest_per_arm
from bench.report import decision
from bench.report.cells import host_of

RACE_STUDY = "lb-keepalive-race"


@dataclass(frozen=True)
class Fix:
    """One server's race on one machine: its default arm, its fix arm (None: none there) and
    the engine's pair (a = default, b = fix; None without a fix arm)."""

    machine: str
    server: str
    default: Record
    fixed: Record | None
    pair: decision.Pair | None
    family: int  # the servers judged together (Holm)
    fix_elsewhere: str | None = None  # the machine a fix arm ran on instead

    @property
    def result(self) -> str:
        """reproduced (the fix lowered the rate), not reproduced (it raised it), or
        inconclusive."""
        if self.pair is None or self.pair.state != "separated":
            return "inconclusive"
        return "reproduced" if self.pair.ratio > 1 else "not reproduced"


def counts(rec: Record) -> tuple[int, int]:
    """(502s, requests sent) of a race arm."""
    errors = rec.errors or {}
    by = errors.get("proxy_by_status") or errors.get("by_status") or {}
    sent = ((rec.network or {}).get("race") or {}).get("sent")
    return int(by.get("502", 0)), int(sent or 0)


def race_arms(records: list[Record]) -> list[Record]:
    """The race's ok records, per arm its latest run."""
    return [
        r
        for r in latest_per_arm(records, RACE_STUDY)
        if r.status == "ok" and (r.network or {}).get("race")
    ]


def _arm_end(rec: Record) -> str:
    arm = str(rec.metadata.get("study_arm", ""))
    return "fix" if arm.endswith("-fix") else "default" if arm.endswith("-default") else ""


def fixes(records: list[Record]) -> dict[tuple[str, str], Fix]:
    """(machine, server) -> its Fix, every server with a default arm; the pairs judged in one
    family."""
    arms = race_arms(records)
    defaults = {(host_of(r), r.server): r for r in arms if _arm_end(r) == "default"}
    fixed = {(host_of(r), r.server): r for r in arms if _arm_end(r) == "fix"}
    paired = sorted(k for k in defaults if k in fixed)
    questions = [
        decision.Question("default", "fix", counts={1: (*counts(defaults[k]), *counts(fixed[k]))})
        for k in paired
    ]
    judged = dict(zip(paired, decision.judge_family(questions), strict=True))
    out = {}
    for key, rec in sorted(defaults.items()):
        elsewhere = next((m for (m, s) in fixed if s == key[1] and m != key[0]), None)
        out[key] = Fix(key[0], key[1], rec, fixed.get(key), judged.get(key), len(paired), elsewhere)
    return out


def zero_needed(default: tuple[int, int], family: int, most: int = 10_000_000) -> int | None:
    """How many requests a fix arm without a 502 must send for the exact test to separate it
    from the default's count in a family of `family` (the first step of Holm's: twice the
    one-sided p below alpha / family); None when no size up to `most` would (the default
    had no 502)."""
    bad, sent = default
    if bad == 0:
        return None

    def decides(n: int) -> bool:
        table = [[bad, sent - bad], [0, n]]
        p = float(stats.fisher_exact(table, alternative="greater").pvalue)
        return 2 * p * max(family, 1) < decision.ALPHA

    if not decides(most):
        return None
    low, high = 1, most  # decides(high) holds; find the smallest that does
    while low < high:
        mid = (low + high) // 2
        low, high = (low, mid) if decides(mid) else (mid + 1, high)
    return low


def why_undecided(fix: Fix) -> str:
    """Why a server's fix is not decided: no fix arm here, no 502 at the default, too few
    events for a fix arm of this size, or the counts do not part."""
    if fix.fixed is None:
        where = f" (one ran on {fix.fix_elsewhere}: not comparable)" if fix.fix_elsewhere else ""
        return f"no fix arm on this machine{where}"
    (bad_d, sent_d), (bad_f, sent_f) = counts(fix.default), counts(fix.fixed)
    if bad_d == 0:
        return f"the default showed no 502 (0 in {sent_d:,}): no race to fix"
    needed = zero_needed((bad_d, sent_d), fix.family)
    if bad_f == 0 and needed is not None and needed > sent_f:
        return (
            f"too few race events to decide: against the default's {bad_d} in {sent_d:,}, a "
            f"fix arm without a 502 would need {needed:,} requests sent (this one sent "
            f"{sent_f:,}; exact test, Holm over {fix.family} servers)"
        )
    return "the counts do not part (exact test)"


def p_text(fix: Fix) -> str:
    """The test as the lines say it: "exact test, adjusted p = 0.004" (or "–")."""
    if fix.pair is None or fix.pair.p is None or math.isnan(fix.pair.p):
        return "exact test: –"
    return f"exact test, adjusted p = {fix.pair.p:.3f} over {fix.family} server(s)"
