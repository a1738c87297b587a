"""The server's share of a request: server CPU time per request on the raw app and on the
framework app, and the share of a framework request that is the server's.

Input: records. Output: Share per server × scenario × configuration where both APP_FLAVOR=raw
and the framework app were measured on one machine in one speed class (same knobs, load and
route; one session where there is one), and the lines of details/share.md. A run's CPU per
request is the server tree's CPU time over its measured window (resources.server_cpu_pct /
100 × duration_s) divided by its requests; each side's figure is the geometric mean over
trials with its 95 % interval, the share the ratio of geometric means raw / framework with
Welch's interval (stats.difference).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, replace

from bench.core.record import Record, flavor_of
from bench.core.registry import FRAMEWORK, RAW
from bench.report.cells import figure, knobs_label, session_label, via_label
from bench.report.groups import groups, machine_group_key
from bench.report.stats import Difference, Estimate, difference, estimate
from bench.report.table import markdown_table

DETAILS_FILE = "share.md"
TITLE = "The server's share of a request"
HOLDS = (
    "server CPU time per request on the raw app and on the framework app, and the share of a "
    "framework request that is the server's"
)


def cpu_us_per_request(rec: Record) -> float | None:
    """The server tree's CPU time per request in µs over the measured window; None when the
    run has no server CPU figure (TARGET=) or served nothing."""
    pct = (rec.resources or {}).get("server_cpu_pct")
    if pct is None or not rec.requests or not rec.duration_s:
        return None
    return float(pct) / 100 * rec.duration_s / rec.requests * 1e6


@dataclass(frozen=True)
class Share:
    """One server at one point, both flavours measured in one session."""

    raw: list[Record]  # the raw app's trials
    framework: list[Record]  # the framework app's trials

    @property
    def first(self) -> Record:
        """A framework trial: what names the point (server, route, framework, session)."""
        return self.framework[0]

    def cost(self, flavor: str) -> Estimate | None:
        """CPU µs per request of one flavour: geometric mean and 95 % interval over trials."""
        return estimate(_costs(self.raw if flavor == RAW else self.framework))

    @property
    def share(self) -> Difference:
        """raw / framework cost: the share of a framework request that is the server's."""
        return difference(_costs(self.framework), _costs(self.raw))


def _costs(trials: list[Record]) -> list[float]:
    return [c for c in (cpu_us_per_request(r) for r in trials) if c is not None]


def _largest(sessions: dict[str, list[Record]]) -> list[Record]:
    """The session with the most trials (ties: the greatest id, so the choice is stable)."""
    return sessions[max(sessions, key=lambda s: (len(sessions[s]), s))]


def shares(records: list[Record]) -> list[Share]:
    """Every point measured with both flavours, in a stable order: in one session where
    there is one; else (APP_FLAVOR is one value per harness invocation, so the two flavours
    are usually two sessions) the framework and raw sessions with the most trials on the same
    machine in the same speed class (host_of names a class where a machine has several), never
    pooled: each side's trials are one session's."""
    by_point: dict[tuple, dict[str, dict[str, list[Record]]]] = defaultdict(
        lambda: {RAW: {}, FRAMEWORK: {}}
    )
    for trials in groups(records).values():
        first = trials[0]
        # The point without its flavour and session: machine (and speed class), knobs, load,
        # route; config_key keeps the flavours apart everywhere else.
        *key, session = machine_group_key(replace(first, app_flavor=None))
        by_point[tuple(key)][flavor_of(first)][session] = trials
    found = []
    for sides in by_point.values():
        raw = {s: t for s, t in sides[RAW].items() if _costs(t)}
        framework = {s: t for s, t in sides[FRAMEWORK].items() if _costs(t)}
        same = sorted(set(raw) & set(framework))
        if same:
            found += [Share(raw[s], framework[s]) for s in same]
        elif raw and framework:
            found.append(Share(_largest(raw), _largest(framework)))
    return sorted(found, key=lambda s: (s.first.scenario, s.first.server, s.first.concurrency))


def _cell(est: Estimate | None) -> str:
    if est is None:
        return "–"
    if est.low is None or est.high is None:
        return figure(est.center)
    return f"{figure(est.center)} [{figure(est.low)}–{figure(est.high)}]"


def _share_cell(diff: Difference) -> str:
    if diff.ratio is None:
        return "–"
    if diff.low is None or diff.high is None:
        return f"{diff.ratio:.0%} (no interval: fewer than 2 trials a side)"
    return f"{diff.ratio:.0%} [{diff.low:.0%}–{diff.high:.0%}]"


def sentence(share: Share) -> str | None:
    """What the row means, in words: of the framework request's CPU, how much is the server."""
    raw, framework, ratio = share.cost(RAW), share.cost(FRAMEWORK), share.share.ratio
    if raw is None or framework is None or ratio is None:
        return None
    first = share.first
    name = (first.app_framework or "framework").capitalize()
    return (
        f"Of the {framework.center:,.0f} µs of CPU {first.server} spends on a {name} "
        f"`{first.path}` request at {first.concurrency} connections, about {raw.center:,.0f} µs "
        f"({ratio:.0%}) is the server's: the rest is the framework's."
    )


def _sessions(share: Share) -> str:
    """The session both flavours ran in, or each flavour's."""
    raw, framework = session_label(share.raw[0]), session_label(share.first)
    return framework if raw == framework else f"framework {framework} / raw {raw}"


HEADER = ["scenario", "server", "knobs", "via", "conc.", "session(s)", "raw µs/req"]
HEADER += ["framework µs/req", "server's share", "trials raw/fw"]


def detail_lines(found: list[Share]) -> list[str]:
    """details/share.md's sections: what it measures, the table, each row in words."""
    rows = [
        [
            s.first.scenario,
            s.first.server,
            knobs_label(s.first.knobs or {}),
            via_label(s.first),
            str(s.first.concurrency),
            _sessions(s),
            _cell(s.cost(RAW)),
            _cell(s.cost(FRAMEWORK)),
            _share_cell(s.share),
            f"{len(s.raw)}/{len(s.framework)}",
        ]
        for s in found
    ]
    words = [line for line in (sentence(s) for s in found) if line is not None]
    return [
        "Server CPU time per request (µs: the server's process tree's CPU over the measured "
        "window, divided by its requests) on the raw app (APP_FLAVOR=raw: the same route with "
        "no framework) and on the framework app, at the same point in the same session. "
        "Figures are geometric means over trials with their 95 % interval; the server's share "
        "is raw / framework (the ratio of geometric means, Welch's interval on log values). "
        "APP_FLAVOR takes one value per run of the harness, so the two flavours are usually two "
        "sessions: they are paired on one machine in one speed class, each side's trials from "
        "one session, and the session(s) column names them. "
        "The raw app still runs its route's own work (JSON encoding, the /db query and "
        "driver), so the share is an upper bound of the server's own cost.",
        "",
        *markdown_table(HEADER, rows, "llllrlrrrr"),
        "",
        *(f"- {line}" for line in words),
        "",
    ]
