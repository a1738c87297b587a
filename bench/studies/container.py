"""A container study's per-server block: each server's two worker rules at each set of limits,
and the worker rule the recommendations give.

Input: a study's records of one run (those with a `container` and a metadata.workers_rule).
Output: markdown lines: a table per server (a row per limit and rule: workers, req/s and p99
with their 95 % intervals over trials, throttled ms, OOM kills of each trial, failed requests,
failed runs), the rule each limit favours with its interval (bench.report.limits), and the
worker rule, as the recommendations say it.
"""

from __future__ import annotations

from bench.core.record import Record
from bench.report.limits import SIDE_HEADER, advice, side_cells
from bench.report.table import markdown_table


def per_server_lines(records: list[Record]) -> list[str]:
    """The block, or nothing when no record pairs a default rule with the quota rule."""
    found = advice(records)
    if not found:
        return []
    lines = [
        "Per server, each rule at each limit (req/s and p99: geometric mean [95 % interval] "
        "over trials; throttled ms: median; OOM kills: the kernel's count in the container's "
        "cgroup over each trial's window, or until a failed run ended; failed requests: "
        "median share without a 2xx answer; the rule each limit favours decided by the "
        "intervals, Bonferroni-corrected over the server's tests):",
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
