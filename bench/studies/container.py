"""A container study's per-server block: each server's two worker rules at each set of limits,
and the worker rule the recommendations give; and the study's verdicts on those pairs, the
one decision every renderer of a limit shows.

Input: a study's records of one run (those with a `container` and a metadata.workers_rule)
and its checks judged (bench.studies.verdict). Output: markdown lines: a table per server (a
row per limit and rule: workers, req/s and p99 with their 95 % intervals over trials, or a
thrashing arm's request counts; throttled ms, OOM kills of each trial, failed requests,
failed runs), the rule each limit favours by the study's checks of it (bench.report.limits),
and the worker rule, as the recommendations say it; `checks_of`: the checks' verdicts per
pair, which Production behaviours and the recommendations are given as well
(bench.studies.sources.limit_checks), so a comparison has one verdict wherever it is shown.
"""

from __future__ import annotations

from collections.abc import Sequence

from bench.core.record import Record
from bench.report.limits import SIDE_HEADER, Check, advice, pair_key, side_cells
from bench.report.table import markdown_table
from bench.studies.metrics import fraction_rates
from bench.studies.schema import Study
from bench.studies.verdict import Outcome, outcomes, side_records

KINDS = ("less", "at_most")


def checks_of(found: Sequence[Outcome], records: list[Record]) -> dict[tuple, list[Check]]:
    """The study's verdicts on comparisons of two worker rules at one set of limits, keyed
    like bench.report.limits.pairs (server, limits, study run): checks whose two sides are
    records of one server under the same limits, each with a workers rule."""
    rates = fraction_rates(records)
    out: dict[tuple, list[Check]] = {}
    for o in found:
        check = o.check
        if check.get("kind") not in KINDS or "a" not in check or "b" not in check:
            continue
        metric = str(check.get("metric"))
        sides = [side_records(records, check[s], rates, metric) or [] for s in ("a", "b")]
        keys = [{pair_key(r) for r in side} - {None} for side in sides]
        rules = [{r.metadata.get("workers_rule") for r in side} for side in sides]
        if any(len(k) != 1 for k in keys) or keys[0] != keys[1] or any(len(r) != 1 for r in rules):
            continue
        separated = o.pair is not None and o.pair.state == "separated"
        item = Check(
            metric,
            str(check["kind"]),
            str(rules[0].pop()),
            str(rules[1].pop()),
            o.result,
            separated,
            o.held,
            o.why,
        )
        out.setdefault(keys[0].pop(), []).append(item)
    return out


def per_server_lines(study: Study, records: list[Record]) -> list[str]:
    """The block, or nothing when no record pairs a default rule with the quota rule; each
    limit's verdict is the study's checks' (judged as its section judges them)."""
    found = advice(records, checks_of(outcomes(study, records), records))
    if not found:
        return []
    lines = [
        "Per server, each rule at each limit (req/s and p99: geometric mean [95 % interval] "
        "over trials, or a thrashing arm's requests per window; throttled ms: geometric mean; "
        "OOM kills: the kernel's count in the container's cgroup over each trial's window, or "
        "until a failed run ended; failed requests: mean share without a 2xx answer; the rule "
        "each limit favours: the study's checks of that pair, as listed above):",
        "",
    ]
    for item in found:
        rows = []
        for judged in item.judged:
            pair = judged.pair
            for side in (pair.default, pair.quota):
                rows.append([pair.limit.label(), *side_cells(side)])
        lines += [f"**{item.server}**", ""]
        lines += markdown_table(["limits", *SIDE_HEADER], rows, "ll" + "r" * 6)
        lines += ["", f"Worker rule under a limit: {item.text}.", ""]
    return lines
