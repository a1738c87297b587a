"""Machines compared on the summary's first screen: where native records of two machines (two
arches, or two hosts of one arch) answer the same point, one line per workload.

Input: every record, and the prices per hour the user gave (PRICE=, by arch or machine
label). Output: the summary's "Machines compared" lines: per pair (the first machine, amd64
first, against each other one) the sessions compared and what else differs (CPUs, CPU model,
clock, kernel, Python); per workload the ratio at its leading configuration measured on both
(the base machine's highest req/s, baselines aside) with its interval and mark, per machine,
per CPU and, with prices, per dollar-hour, and how the workload's other points came out;
then one line for emulated runs, a functional check never compared. The ratios are `make
compare`'s (bench.report.compare): one session per side and point, Welch's t-test on log
values, Holm-corrected over every point the pair has in common.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass

from bench.core.record import Record, analysed, of_study
from bench.report.cells import cpu_tag, host_of, knobs_label, num, via_label
from bench.report.compare import (
    NOT_SIGNIFICANT,
    SIGNIFICANT,
    UNTESTABLE,
    Comparison,
    Row,
    compare,
    ratio_cell,
    sessions_text,
)
from bench.report.groups import BASELINES, is_experiment, rps_values
from bench.report.recommend import WORKLOADS
from bench.report.stats import Difference, estimate

TITLE = "## Machines compared"
# What else differs between two machines, read from the records' metadata: (label, key)
FACTS = (
    ("CPUs", "cpus_usable"),
    ("CPU", "cpu_model"),
    ("clock MHz", "cpu_mhz"),
    ("kernel", "kernel"),
    ("Python", "python_version"),
)
LEGEND = (
    f"Ratios are the second machine's over the first's, geometric means over trials, 95 % "
    f"interval; `{SIGNIFICANT}` significant after Holm's correction over every point the two "
    f"have in common, `{NOT_SIGNIFICANT}` not, `{UNTESTABLE}` untestable (1 trial a side). "
    "p99 above 1.00× is slower. Per CPU divides by the CPUs the server could use; per $/h by "
    "the price per hour given in PRICE=. Each machine, and amd64 against arm64 point by "
    "point: "
)


@dataclass(frozen=True)
class Side:
    """One machine's native runs: its name in the summary, its arch, its records."""

    name: str
    arch: str
    records: list[Record]

    @property
    def label(self) -> str:
        return f"{self.arch} ({self.name})"


def _native(rec: Record) -> bool:
    """A steady native run: no emulation, no study, no experiment (bench.report.groups)."""
    return analysed(rec) and not rec.emulated and not of_study(rec) and not is_experiment(rec)


def sides(records: list[Record]) -> list[Side]:
    """Every machine with native runs, amd64 first, then by name."""
    found: dict[tuple[str, str], list[Record]] = defaultdict(list)
    for rec in records:
        if _native(rec):
            found[(host_of(rec), rec.arch)].append(rec)
    order = sorted(found, key=lambda key: (key[1] != "amd64", key[1], key[0]))
    return [Side(name, arch, found[(name, arch)]) for name, arch in order]


def _fact(group: list[Record], key: str) -> str:
    values = sorted({str(r.metadata.get(key)) for r in group if r.metadata.get(key) is not None})
    if key == "cpu_model":
        values = [cpu_tag(v) for v in values]
    return "/".join(values) or "not recorded"


def differences(base: list[Record], head: list[Record]) -> str:
    """`differs: CPUs 2 vs 4, CPU AMD EPYC vs Neoverse-N1; same: kernel …, Python 3.11.7`:
    what besides the arch can make two machines' figures differ."""
    differ, same = [], []
    for label, key in FACTS:
        a, b = _fact(base, key), _fact(head, key)
        (same if a == b else differ).append(f"{label} {a}" if a == b else f"{label} {a} vs {b}")
    return f"differs: {', '.join(differ) or 'none of these'}; same: {', '.join(same) or '–'}"


def _cpus(group: list[Record]) -> int | None:
    counts = {r.metadata.get("cpus_usable") or r.metadata.get("cpu_count") for r in group}
    return counts.pop() if len(counts) == 1 and None not in counts else None


def price_of(side: Side, prices: Mapping[str, float]) -> float | None:
    """The side's price per hour: by its MACHINE= label or host name, else by its arch."""
    meta = side.records[0].metadata
    for key in (meta.get("machine_label"), meta.get("hostname"), side.arch):
        if key and key in prices:
            return prices[str(key)]
    return None


def scaled(diff: Difference, factor: float) -> str:
    """A ratio and its interval multiplied by a constant (per CPU, per dollar: the CPUs and
    prices are the same in every trial, so the interval scales); no mark: the test is the
    ratio's own."""
    if diff.ratio is None:
        return "–"
    if diff.low is None or diff.high is None:
        return f"{diff.ratio * factor:.2f}×"
    return f"{diff.ratio * factor:.2f}× [{diff.low * factor:.2f}–{diff.high * factor:.2f}]"


def _leading(rows: list[Row]) -> Row:
    """The configuration a user of the base machine would run: its highest req/s, baselines
    only when nothing else was measured on both."""
    served = [r for r in rows if r.base[0].server not in BASELINES] or rows

    def base_rps(row: Row) -> float:
        est = estimate(rps_values(row.base))
        return est.center if est else 0.0

    return max(served, key=base_rps)


def _point(rec: Record) -> str:
    knobs = knobs_label(rec.knobs or {})
    load = f"{num(rec.offered_rps)}/s" if rec.offered_rps is not None else f"c{rec.concurrency}"
    parts = [rec.server, knobs, rec.scenario, load, via_label(rec)]
    return " ".join(p for p in parts if p)


def _per_dollar(row: Row, base: Side, head: Side, prices: Mapping[str, float]) -> str:
    base_price, head_price = price_of(base, prices), price_of(head, prices)
    if not prices:
        return ""
    if base_price is None or head_price is None:
        missing = [s.label for s, p in ((base, base_price), (head, head_price)) if p is None]
        return f"; per $/h: no price for {', '.join(missing)}"
    rps = [estimate(rps_values(group)) for group in (row.base, row.head)]
    per = [
        num(est.center / price) if est else "–"
        for est, price in zip(rps, (base_price, head_price), strict=True)
    ]
    return (
        f"; per $/h ({base_price:g} vs {head_price:g}): {per[0]} vs {per[1]} req/s, "
        f"{scaled(row.rps, base_price / head_price)}"
    )


def _counts(rows: list[Row]) -> str:
    higher = sum(1 for r in rows if r.rps.significant and (r.rps.ratio or 0) > 1)
    lower = sum(1 for r in rows if r.rps.significant and (r.rps.ratio or 0) < 1)
    return f"{len(rows)} point(s) in both, req/s higher in {higher}, lower in {lower}"


def workload_line(
    workload: str, rows: list[Row], pair: tuple[Side, Side], prices: Mapping[str, float]
) -> str:
    """One workload's line: the leading configuration's ratios, per CPU and per dollar."""
    base, head = pair
    row = _leading(rows)
    cpus = (_cpus(row.base), _cpus(row.head))
    per_cpu = (
        f"; per CPU ({cpus[0]} vs {cpus[1]}) {scaled(row.rps, cpus[0] / cpus[1])}"
        if cpus[0] and cpus[1]
        else "; per CPU: CPUs not recorded"
    )
    return (
        f"- **{workload}**, {_point(row.base[0])}: req/s {ratio_cell(row.rps)}, "
        f"p99 {ratio_cell(row.p99)}{per_cpu}{_per_dollar(row, base, head, prices)} "
        f"({_counts(rows)})."
    )


def pair_lines(base: Side, head: Side, prices: Mapping[str, float]) -> list[str]:
    """A pair of machines: who, which sessions, what else differs, a line per workload."""
    comparison: Comparison = compare(base.records, head.records)
    # the sessions and facts of the trials compared (one session per point and side)
    used = (
        [r for row in comparison.rows for r in row.base] or base.records,
        [r for row in comparison.rows for r in row.head] or head.records,
    )
    lines = [
        f"**{head.label} vs {base.label}**: {head.name} {sessions_text(used[1])}, "
        f"{base.name} {sessions_text(used[0])}; {differences(*used)}.",
        "",
    ]
    if not comparison.rows:
        return [
            *lines,
            "No point measured on both yet: run the same SERVER, SCENARIO and CONCURRENCY on "
            "each (`make remote HOST=…` runs it on the other machine).",
            "",
        ]
    for workload, scenarios in WORKLOADS.items():
        rows = [r for r in comparison.rows if r.base[0].scenario in scenarios]
        if rows:
            lines.append(workload_line(workload, rows, (base, head), prices))
    others = [
        r for r in comparison.rows if not any(r.base[0].scenario in s for s in WORKLOADS.values())
    ]
    if others:
        lines.append(workload_line("other scenarios", others, (base, head), prices))
    return [*lines, ""]


def _emulated_line(records: list[Record]) -> list[str]:
    emulated = [r for r in records if r.emulated]
    if not emulated:
        return []
    arches = sorted({f"{r.arch} on {r.host_arch}" for r in emulated})
    return [
        f"Emulated runs ({len(emulated)} record(s), {', '.join(arches)}) are a functional "
        "check, never in these ratios: [machines](details/machines.md).",
        "",
    ]


def summary_lines(records: list[Record], prices: Mapping[str, float] | None = None) -> list[str]:
    """The first screen's comparison of machines; nothing when fewer than two machines have
    native runs."""
    found = sides(records)
    if len(found) < 2:
        return []
    lines = [TITLE, ""]
    for head in found[1:]:
        lines += pair_lines(found[0], head, prices or {})
    return [
        *lines,
        LEGEND + "[machines](details/machines.md).",
        "",
        *_emulated_line(records),
    ]
