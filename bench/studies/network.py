"""The sections of studies measured in network namespaces, and "Defaults behind a load
balancer".

Input: a study described by `expect` (bench.studies.schema) and its latest run's records
(each with `network`: the namespace's sysctls, kernel counter deltas, TIME_WAIT and
accept-queue peaks, nginx's error-log reasons). Output: markdown lines: the claim, what was
expected, for the race a verdict on the documented fix (per server with a default and a fix
arm: bench.report.keepalive's exact test, the decision the recommendations use), a table per arm
(errors with nginx's reasons, kernel counters, TIME_WAIT; for the race the 502s per 10,000
requests with the count and an exact binomial 95 % interval), what the arms showed; then per
server its defaults (keep-alive timeout, backlog) beside what the race measured.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable, Sequence

from scipy import stats

from bench.core.outcome import Outcome
from bench.core.record import Record
from bench.core.registry import load_all
from bench.report import keepalive
from bench.report.cells import figure, host_of
from bench.report.table import markdown_table
from bench.studies.metrics import latest_run, runs_text
from bench.studies.schema import RACE_LOAD, Study, StudyError, load_study
from bench.studies.verdict import Outcome as Judged
from bench.studies.verdict import tally
from bench.studies.verdict import verdict as verdict_of

RACE = "lb-keepalive-race"
BALANCER_IDLE_S = 60


def _status_count(rec: Record, status: int) -> int:
    errors = rec.errors or {}
    by = errors.get("proxy_by_status") or errors.get("by_status") or {}
    return int(by.get(str(status), 0))


def _client_errors(rec: Record) -> int:
    return Outcome.of_record(rec).socket_errors


def _reason(rec: Record) -> tuple[str, int] | None:
    """The first reason requests failed: nginx's error log first, else the client's
    commonest message; and its count."""
    reasons = (rec.network or {}).get("proxy_error_reasons") or {}
    if reasons:
        text, count = next(iter(reasons.items()))
        return str(text), int(count)
    messages = (rec.errors or {}).get("by_message") or {}
    failures = {k: v for k, v in messages.items() if k != "aborted due to deadline"}
    if failures:
        text, count = max(failures.items(), key=lambda kv: kv[1])
        return f"{text} (client)", int(count)
    return None


def _top_reason(rec: Record) -> str:
    found = _reason(rec)
    return "–" if found is None else f"{found[1]} × {found[0]}"


def _sent(rec: Record) -> int:
    race = (rec.network or {}).get("race") or {}
    if "sent" in race:
        return int(race["sent"])
    return (rec.requests or 0) + _client_errors(rec)


def rate_per_10k(bad: int, sent: int) -> tuple[float, float, float] | None:
    """A rate of `bad` in `sent` independent tries, per 10,000, with its exact (Clopper–
    Pearson) two-sided 95 % interval: few events give a wide one (0 in 880: 0–42)."""
    if not sent:
        return None
    ci = stats.binomtest(bad, sent).proportion_ci(confidence_level=0.95, method="exact")
    return 10_000 * bad / sent, 10_000 * float(ci.low), 10_000 * float(ci.high)


def _bad_gaps(rec: Record) -> str:
    """The idle gaps whose bursts got 502s: `2002 (1), 2005 (2)`."""
    by_gap = ((rec.network or {}).get("race") or {}).get("by_gap") or {}
    bad = [(int(g), int(v.get("502", 0))) for g, v in by_gap.items() if v.get("502")]
    return ", ".join(f"{g} ({n})" for g, n in sorted(bad)) or "–"


def idle_close_text(rec: Record) -> str:
    """The measured idle close: seconds, "0 (no keep-alive)", "open at N s", or "–"."""
    race = (rec.network or {}).get("race") or {}
    limit = race.get("probe_limit_s")
    if not limit:
        return "–"
    close = race.get("idle_close_s")
    if close is None:
        return f"open at {limit} s"
    return "0 (no keep-alive)" if close == 0 else f"{close:.2f}"


def failed_pct_text(rec: Record) -> str:
    """The share of arrivals without a 2xx answer: 502/504 from the front, client errors,
    arrivals oha never sent (requests oha cut off at its own deadline count on neither side)."""
    pct = Outcome.of_record(rec).unserved_pct
    return "–" if pct is None else f"{pct:.2f}"


def per_10k(rec: Record) -> str:
    """502s per 10,000 requests sent, or the bound when none was seen."""
    sent = _sent(rec)
    bad = _status_count(rec, 502)
    race = (rec.network or {}).get("race") or {}
    if race.get("probe_limit_s") and race.get("idle_close_s") == 0 and not bad:
        return f"no race possible: no idle connection to lose ({sent:,} sent)"
    if not sent and race.get("probe_limit_s") and race.get("idle_close_s") is None:
        return f"no race: idle connections outlive the balancer's {BALANCER_IDLE_S} s"
    if not sent:
        return "–"
    rate, low, high = rate_per_10k(bad, sent)  # type: ignore[misc]
    if bad == 0:
        return f"0 [0–{high:.0f}] (0 in {sent:,}: race not seen)"
    return f"{rate:.1f} [{low:.1f}–{high:.0f}] ({bad} in {sent:,})"


def _upstream_opens_per_request(rec: Record) -> float | None:
    """New upstream connections per request behind the front: passive opens inside the
    namespace minus the client's own (one per request: the race sends each on a new
    connection, plus one warm-up burst)."""
    network = rec.network or {}
    race = network.get("race") or {}
    opens = (network.get("kernel_counters") or {}).get("TcpPassiveOpens")
    sent = race.get("sent")
    if opens is None or not sent:
        return None
    # The probe's own connection went straight to the server: one passive open more.
    client = int(sent) + int(race.get("burst", 0))
    opens -= 1 if race.get("probe_limit_s") else 0
    return max(0, opens - client) / client


def _sysctl_text(rec: Record, varying: set[str]) -> str:
    sysctls = (rec.network or {}).get("sysctls") or {}
    return ", ".join(f"{k.rsplit('.', 1)[1]}={sysctls[k]}" for k in sorted(varying) if k in sysctls)


RACE_HEADER = [
    "arm",
    "server",
    "sysctls",
    "keep-alive s (setting)",
    "idle close s (measured)",
    "sent",
    "502s",
    "502 per 10,000 [95 %] (count)",
    "gaps ms with 502s (count)",
    "upstream conns per request",
    "first reason (nginx error log)",
    "client errors",
]
RATE_HEADER = [
    "arm",
    "server",
    "sysctls",
    "2xx/s",
    "p99 ms",
    "502s",
    "504s",
    "client errors",
    "TIME_WAIT peak",
    "overflows / drops / embryonic RSTs",
    "first reason",
    "not sent (oha's connections all busy)",
    "failed % (ours)",
    "failed % (source)",
]
QUEUE_COUNTERS = ("TcpExtListenOverflows", "TcpExtListenDrops", "TcpExtEmbryonicRsts")


def _race_row(rec: Record) -> list[str]:
    """A raced arm's cells after arm, server and sysctls."""
    return [
        str(rec.knobs.get("keepalive", "–")),
        idle_close_text(rec),
        f"{_sent(rec):,}",
        str(_status_count(rec, 502)),
        per_10k(rec),
        _bad_gaps(rec),
        figure(_upstream_opens_per_request(rec)),
        _top_reason(rec),
        str(_client_errors(rec)),
    ]


def _published_failed_pct(study: Study, arm: str) -> str:
    """The source's failed % for an arm (`published`, metric failed_pct), or blank."""
    figures = [f for f in study.published if f.get("arm") == arm]
    found = [f["value"] for f in figures if f.get("metric") == "failed_pct"]
    return figure(float(found[0])) if found else ""


def _rate_row(study: Study, rec: Record) -> list[str]:
    """An arm at a fixed rate (oha): its cells after arm, server and sysctls."""
    kernel = (rec.network or {}).get("kernel_counters") or {}
    return [
        figure(rec.achieved_rps),
        figure((rec.latency_ms or {}).get("p99")),
        str(_status_count(rec, 502)),
        str(_status_count(rec, 504)),
        str(_client_errors(rec)),
        figure((rec.sockets or {}).get("time_wait_max")),
        " / ".join(figure(kernel.get(k)) for k in QUEUE_COUNTERS),
        _top_reason(rec),
        str(int((rec.errors or {}).get("unsent") or 0)),
        failed_pct_text(rec),
        _published_failed_pct(study, str(rec.metadata.get("study_arm"))),
    ]


def _varying_sysctls(records: list[Record]) -> set[str]:
    """The sysctls whose value differs between arms (the others say nothing per row)."""
    values = [set(((r.network or {}).get("sysctls") or {}).items()) for r in records]
    keys = {k for v in values for k, _ in v}
    return {k for k in keys if len({dict(v).get(k) for v in values}) > 1}


def _raced(study: Study) -> bool:
    """Whether the study's arms are loaded by the keep-alive race (not oha)."""
    return any(a.load == RACE_LOAD for a in study.arms)


# An arm over its rounds (open loop at a fixed rate): rates and latencies as medians, counts
# summed, the TIME_WAIT peak the highest; each round's row follows in a folded table.
RATE_SUMMARY_HEADER = [
    "arm",
    "server",
    "sysctls",
    "rounds",
    "2xx/s (median)",
    "p99 ms (median)",
    "502s (sum)",
    "504s (sum)",
    "client errors (sum)",
    "TIME_WAIT peak (highest)",
    "overflows / drops / embryonic RSTs (sums)",
    "commonest first reason (sum)",
    "not sent (sum)",
    "failed % (median)",
    "failed % (source)",
]


def _median(values: Sequence[float | None]) -> float | None:
    found = [float(v) for v in values if v is not None]
    return statistics.median(found) if found else None


def _rate_summary_row(study: Study, arm: str, recs: list[Record]) -> list[str]:
    """An arm's rounds in one row's cells after arm, server and sysctls (RATE_SUMMARY_HEADER)."""
    ok = [r for r in recs if r.status == "ok"]
    failed = len(recs) - len(ok)
    rounds = f"{len(ok)}" + (f" ({failed} failed)" if failed else "")
    if not ok:
        return [rounds] + [""] * (len(RATE_SUMMARY_HEADER) - 5) + [""]

    def kernel(rec: Record, key: str) -> int:
        return int(((rec.network or {}).get("kernel_counters") or {}).get(key) or 0)

    reasons: Counter[str] = Counter()
    for rec in ok:
        found = _reason(rec)
        if found is not None:
            reasons[found[0]] += found[1]
    commonest = reasons.most_common(1)
    peaks = [(r.sockets or {}).get("time_wait_max") for r in ok]
    return [
        rounds,
        figure(_median([r.achieved_rps for r in ok])),
        figure(_median([(r.latency_ms or {}).get("p99") for r in ok])),
        f"{sum(_status_count(r, 502) for r in ok):,}",
        f"{sum(_status_count(r, 504) for r in ok):,}",
        f"{sum(_client_errors(r) for r in ok):,}",
        figure(max((p for p in peaks if p is not None), default=None)),
        " / ".join(f"{sum(kernel(r, k) for r in ok):,}" for k in QUEUE_COUNTERS),
        f"{commonest[0][1]:,} × {commonest[0][0]}" if commonest else "–",
        f"{sum(int((r.errors or {}).get('unsent') or 0) for r in ok):,}",
        figure(_median([Outcome.of_record(r).unserved_pct for r in ok])),
        _published_failed_pct(study, arm),
    ]


def _arm_summary_table(study: Study, records: list[Record]) -> list[str]:
    """One row per arm over its rounds (RATE_SUMMARY_HEADER), in the study's arm order."""
    labels = {a.id: a.label for a in study.arms}
    varying = _varying_sysctls([r for r in records if r.status == "ok"])
    by_arm: dict[str, list[Record]] = {}
    for rec in records:
        by_arm.setdefault(str(rec.metadata.get("study_arm")), []).append(rec)
    order = [a for a in labels if a in by_arm] + [a for a in by_arm if a not in labels]
    rows = []
    for arm in order:
        recs = by_arm[arm]
        first = next((r for r in recs if r.status == "ok"), recs[0])
        common = [labels.get(arm, arm), first.server, _sysctl_text(first, varying) or "–"]
        rows.append(common + _rate_summary_row(study, arm, recs))
    return markdown_table(RATE_SUMMARY_HEADER, rows, "lllrrrrrrrrlrrr")


def _arm_table(study: Study, records: list[Record]) -> list[str]:
    """The arms' table: one row per run; where an open-loop arm ran several rounds, one row
    per arm over them first, the rounds' rows folded below it."""
    several = any(r.trial > 1 for r in records)
    if several and not _raced(study):
        return [
            *_arm_summary_table(study, records),
            "",
            # markdown="1": the table inside is markdown for the HTML report (md_in_html) too
            f'<details markdown="1"><summary>Each round\'s run ({len(records)} runs)</summary>',
            "",
            *_run_table(study, records),
            "",
            "</details>",
        ]
    return _run_table(study, records)


def _run_table(study: Study, records: list[Record]) -> list[str]:
    """One row per run (each round its own, labelled with it)."""
    labels = {a.id: a.label for a in study.arms}
    varying = _varying_sysctls(records)
    race = _raced(study)
    header = RACE_HEADER if race else RATE_HEADER
    order = list(labels)
    several = any(r.trial > 1 for r in records)
    rows = []
    for rec in sorted(
        records,
        key=lambda r: (
            order.index(r.metadata.get("study_arm"))
            if r.metadata.get("study_arm") in labels
            else 99,
            r.trial,
        ),
    ):
        arm = str(rec.metadata.get("study_arm"))
        if rec.status != "ok":
            failed = [labels.get(arm, arm), rec.server, f"failed: {rec.reason}"]
            rows.append(failed + [""] * (len(header) - 3))
            continue
        label = labels.get(arm, arm) + (f" (round {rec.trial})" if several else "")
        common = [label, rec.server, _sysctl_text(rec, varying) or "–"]
        rows.append(common + (_race_row(rec) if race else _rate_row(study, rec)))
    return markdown_table(header, rows, "lllrrrrllrlr" if race else "lllrrrrrrrlrrr")


def _arms_with(
    records: list[Record], labels: dict[str, str], value: Callable[[Record], int]
) -> str:
    """The arms with events, each once: its count (summed over its rounds, and how many)."""
    counts: dict[str, list[int]] = {}
    for rec in records:
        if rec.status == "ok":
            label = labels.get(str(rec.metadata.get("study_arm")), rec.server)
            counts.setdefault(label, []).append(value(rec))
    found = [
        f"{label} ({sum(n):,}" + (f" over {len(n)} rounds)" if len(n) > 1 else ")")
        for label, n in counts.items()
        if sum(n)
    ]
    return "; ".join(found) if found else "none"


def measured_lines(study: Study, records: list[Record]) -> list[str]:
    """What the arms showed, counted from the records: which arms had 502s, 504s, nginx's
    errno 99, SYNs dropped on a full queue, handshakes reset by tcp_abort_on_overflow."""
    labels = {a.id: a.label for a in study.arms}

    def kernel(key: str) -> Callable[[Record], int]:
        return lambda r: int(((r.network or {}).get("kernel_counters") or {}).get(key) or 0)

    def errno99(r: Record) -> int:
        reasons = (r.network or {}).get("proxy_error_reasons") or {}
        return sum(n for text, n in reasons.items() if "(99: " in text)

    return [
        "Measured (counts from the records):",
        "",
        f"- 502s: {_arms_with(records, labels, lambda r: _status_count(r, 502))}",
        f"- 504s: {_arms_with(records, labels, lambda r: _status_count(r, 504))}",
        f"- nginx connects failing with errno 99: {_arms_with(records, labels, errno99)}",
        "- SYNs dropped on a full accept queue (ListenOverflows): "
        + _arms_with(records, labels, kernel("TcpExtListenOverflows")),
        "- handshakes reset (EmbryonicRsts, what tcp_abort_on_overflow=1 does): "
        + _arms_with(records, labels, kernel("TcpExtEmbryonicRsts")),
        "",
    ]


def fix_outcome(fix: keepalive.Fix) -> Judged:
    """Whether the documented fix (keep-alive above the balancer's) lowered a server's 502
    rate: bench.report.keepalive's decision (the recommendations read the same), in words."""
    assert fix.fixed is not None
    result = fix.result
    if result == "reproduced":
        why = f"the fix's rate is lower ({keepalive.p_text(fix)})"
    elif result == "not reproduced":
        why = f"the fix's rate is higher ({keepalive.p_text(fix)})"
    else:
        why = f"{keepalive.why_undecided(fix)} ({keepalive.p_text(fix)})"
    line = (
        f"- {fix.server}, 502 per 10,000: default keep-alive {per_10k(fix.default)}, keep-alive "
        f"above {BALANCER_IDLE_S} s {per_10k(fix.fixed)} — {result}: {why}"
    )
    return Judged({}, result, line, result)


def fix_pairs(records: list[Record]) -> dict[str, keepalive.Fix]:
    """Per server (and machine, where several), its default arm with a fix arm of the same
    machine, judged in one family (bench.report.keepalive)."""
    found = [f for f in keepalive.fixes(records).values() if f.fixed is not None]
    machines = {f.machine for f in found}
    return {(f.server if len(machines) == 1 else f"{f.server} on {f.machine}"): f for f in found}


def unfixed_lines(study: Study, records: list[Record], paired: set[str]) -> list[str]:
    """A line per server whose default raced (502s) without a fix arm: why (the study's
    `no_fix`: no setting above the balancer's), or that no fix arm ran."""
    lines = []
    elsewhere = {
        f.server: f.fix_elsewhere for f in keepalive.fixes(records).values() if f.fix_elsewhere
    }
    for rec in sorted(records, key=lambda r: r.server):
        arm = str(rec.metadata.get("study_arm"))
        if rec.status != "ok" or not arm.endswith("-default") or rec.server in paired:
            continue
        if rec.server in study.no_fix:
            why = study.no_fix[rec.server]
            lines.append(f"- {rec.server}, 502 per 10,000: default {per_10k(rec)} — no fix: {why}")
        elif rec.server in elsewhere:
            lines.append(
                f"- {rec.server}, 502 per 10,000: default {per_10k(rec)} — inconclusive: its fix "
                f"arm ran on {elsewhere[rec.server]}, the default on {host_of(rec)}: not one "
                "comparison"
            )
        elif _status_count(rec, 502):
            lines.append(f"- {rec.server}, 502 per 10,000: default {per_10k(rec)} — no fix arm ran")
    return lines


def fix_verdict_lines(study: Study, records: list[Record]) -> list[str]:
    """The race's verdict: per server with both arms, whether the fix lowered the 502 rate
    (bench.report.keepalive's exact test, Holm over the servers); then the servers that
    raced without a fix arm, and why (none without a fix arm at all)."""
    pairs = fix_pairs(records) if _raced(study) else {}
    if not pairs:
        return []
    outcomes = [fix_outcome(fix) for _, fix in sorted(pairs.items())]
    return [
        f"**Verdict: {verdict_of(outcomes)}** ({tally(outcomes)}: the documented fix, "
        f"keep-alive above the balancer's {BALANCER_IDLE_S} s, against each server's default, "
        f"for the {len(pairs)} server{'s' if len(pairs) != 1 else ''} with both arms; rule: "
        "the two 502 counts compared by an exact test, Fisher's, Holm over these servers; the "
        "recommendations read the same decision).",
        "",
        *(o.line for o in outcomes),
        *unfixed_lines(study, records, {f.server for f in pairs.values()}),
        "",
    ]


def _evidence_text(records: list[Record]) -> str:
    """What the section's figures rest on, from the records: rounds per arm and the runs a
    foreign load overlapped (bench.observe.foreign), never a description typed in."""
    rounds = max((r.trial for r in records), default=1)
    foreign = sum(1 for r in records if r.foreign_load is True)
    each = "One round per arm: single runs" if rounds == 1 else f"Up to {rounds} rounds per arm"
    if foreign:
        return f"{each}; {foreign} run(s) overlapped foreign load (see Foreign load)."
    return f"{each}; no run overlapped foreign load."


def study_section(study: Study, records: list[Record], verdict: Sequence[str] = ()) -> list[str]:
    """One namespace study's section; `verdict`: its checks judged (a judged study's, by
    bench.studies.sections), shown above the arms' table."""
    first = records[0]
    runs = runs_text(records)
    lines = [
        f"## Study: {study.name} — {study.title}",
        "",
        f"Source: `{study.source}`. {runs[0].upper()}{runs[1:]}, each arm in a network "
        "namespace of the harness's own (sysctls set there only), oha "
        f"{first.load_tool_version or ''} or the burst pattern of bench/load/race.py. "
        f"{_evidence_text(records)}",
        "",
        f"**Claim.** {study.claim}",
        "",
        *([f"**Expected.** {study.expect}", ""] if study.expect else []),
        f"**How ours differs.** {study.differs}",
        "",
        *verdict,
        *fix_verdict_lines(study, records),
        *_arm_table(study, records),
        "",
        *measured_lines(study, records),
    ]
    return lines


def _keeps_alive(rec: Record) -> str:
    race = (rec.network or {}).get("race") or {}
    opens = _upstream_opens_per_request(rec)
    if race.get("idle_close_s") == 0 or (opens is not None and opens > 0.9):
        return "no: a new connection per request" + (
            f" ({opens:.2f} upstream connects per request)" if opens is not None else ""
        )
    if race.get("probe_limit_s"):
        return "yes"
    return "–"


def _race_study() -> Study | None:
    try:
        return load_study(RACE)
    except StudyError:
        return None


def race_records(records: list[Record]) -> list[Record]:
    """The race's records as its section shows them: per arm its latest run."""
    study = _race_study()
    return latest_run(records, RACE, tuple(a.id for a in study.arms) if study else None)


def _fix_cell(server: str, fixed: list[Record], study: Study | None) -> str:
    """The defaults table's fix column: the fix arm's rate, or why there is none."""
    if fixed:
        return per_10k(fixed[0])
    if study is not None and server in study.no_fix:
        return "no setting above the balancer's (see the race study)"
    return "not measured"


def defaults_table(records: list[Record]) -> list[str]:
    """Per server: its own keep-alive timeout and backlog, and what the race measured."""
    race = [r for r in race_records(records) if r.status == "ok"]
    study = _race_study()
    rows = []
    for sid, spec in sorted(load_all().items()):
        if spec.app == "static":
            continue
        keepalive = spec.knobs.get("keepalive")
        backlog = spec.knobs.get("backlog")
        ka_text = f"{keepalive.server_default} s" if keepalive is not None else "no setting here"
        mine = [r for r in race if r.server == sid]
        # The study's arms are named <what>-default (the server as shipped) and <what>-fix.
        default = [r for r in mine if str(r.metadata.get("study_arm")).endswith("-default")]
        fixed = [r for r in mine if str(r.metadata.get("study_arm")).endswith("-fix")]
        rows.append(
            [
                sid,
                ka_text,
                idle_close_text(default[0]) if default else "not measured",
                str(backlog.server_default) if backlog is not None else "–",
                _keeps_alive(default[0]) if default else "not measured",
                per_10k(default[0]) if default else "not measured",
                _fix_cell(sid, fixed, study),
            ]
        )
    return [
        "## Defaults behind a load balancer",
        "",
        "Each server with its own defaults behind the ALB-like front (PROXY=alb: "
        f"{BALANCER_IDLE_S} s upstream idle timeout, no retry), from each arm's latest "
        "`lb-keepalive-race` run: 502s when the server's keep-alive is shorter than the "
        "balancer's, then with the documented fix "
        f"(keep-alive above {BALANCER_IDLE_S} s). Backlog is the server's own default.",
        "",
        *markdown_table(
            [
                "server",
                "keep-alive setting (declared default)",
                "idle close s (measured)",
                "backlog",
                "keeps connections alive",
                "502 per 10,000 [95 %] (default)",
                "502 per 10,000 [95 %] (keep-alive > 60 s)",
            ],
            rows,
            "lrrrlll",
        ),
        "",
    ]


def defaults_section(records: list[Record]) -> list[str]:
    """The defaults table, when the race ran; else nothing."""
    return defaults_table(records) if race_records(records) else []
