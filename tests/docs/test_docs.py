"""README.md and docs/: short, linked, and no hand-typed measurement.

Input: README.md, docs/*.md, the shipped reference's generated files (results/reference/summary.md
and details/*.md) and the text of the generators the test can re-run (`python -m
bench.studies.cost`). Output: a failure per typed figure that has no source.

A figure is a number with its unit (`757 s`, `2 min 16 s`, `±5 %`, `3.7×`, `1,234 req/s`,
`12 MB`) in prose or tables, outside code. Each one must be either
- found, with its unit, in a generated text with at least two of the words around it in the
  doc also around it there (so "95 %" of an interval does not pass on a "95 %" of a pass
  share), or
- listed in `LISTED` below with the text around it: a rule the doc states (a default, a bound,
  a confidence level, a published claim), or a figure measured by a command the test cannot
  re-run, with that command and why not.
A re-run that changes a generated figure then fails here instead of leaving a stale number
behind; a listed entry that no longer matches a figure fails too, so the list stays true.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

from bench.core import defaults as D
from bench.core.registry import server_ids
from bench.core.variables import CONFIRM_ABOVE_S
from bench.observe.foreign import KERNEL_BUSY_PERCENT, THRESHOLD_PERCENT
from bench.report.variance import CLOSE_S
from bench.studies.metrics import WS_MEMORY_LIMIT_MB

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
REFERENCE = ROOT / "results" / "reference"
NUMBER = r"\d[\d,]*(?:\.\d+)?"
# a number (or a duration `2 min 16 s`) and its unit: × and % may touch the number, a word unit
# is spaced (so `502s`, `2xx` and `2×CPU` are not figures)
FIGURE = re.compile(
    rf"(?<![\w.\-–/])(±?{NUMBER}(?: min {NUMBER}(?= s\b))?)"
    r"(?:\s?(×|%)|\s(req/s|rps|ms|µs|s|min|minutes|hours|MB|MiB|GB|KB|KiB))(?![\w/])"
)
# words too common in this project's prose to tie a figure to its place
COMMON = frozenset(
    re.findall(
        r"\w+",
        "with that this from their there which when where then than each every only also have"
        " been more less into over under about after before they them what whose these those"
        " time times here same other server servers",
    )
)
CONTEXT_CHARS = 120  # each side of a figure: the words that say what it is a figure of
CONTEXT_WORDS = 2  # of them also next to it in the generated text


@dataclass(frozen=True)
class Listed:
    """Figures in `doc` inside `text` (whitespace-insensitive; the whole table or paragraph
    that starts with it when `block`) that are stated, not generated: `why` says what they
    are, or the command that measured them and why this test cannot re-run it."""

    doc: str
    text: str
    why: str
    block: bool = False


RULE = "a stated rule, bound, level or design value, not a measurement"
STATS = (
    "printed by `python -m bench.report.stats` (seeded simulations: minutes of CPU on this"
    " machine, too slow for this test)"
)
DESIGN = "a value of the method, quoted from the evidence behind it (bench/core/defaults.py)"
_MIN = (D.WARMUP_S + D.DURATION_S) * len(D.SCENARIOS) * len(D.CONCURRENCY) * D.TRIALS / 60
_SERVERS = len(server_ids())
LISTED: tuple[Listed, ...] = (
    # docs/method.md
    Listed(
        "method.md",
        f"{round(D.SPEED_TOLERANCE * 100)} %) is set from the probe's own A/A spread",
        "20 calls of bench.host.speed.probe() in a row on a quiet machine, 2026-11-29 (issue 55's"
        " closing note): a measurement of the host, which the test cannot re-run",
        block=True,
    ),
    Listed(
        "method.md",
        "is 8 boots over 39 hours on 3 kernel builds and two reported clocks (2596 and 2445 MHz), "
        "and the same configuration ran 2.5–4.2× slower on some of them",
        "the shipped reference's records before format 17 (speed unknown), per session: boot_id, "
        "kernel, cpu_mhz, started_at (issue 55's audit); details/machines.md lists them",
        block=True,
    ),
    # README.md
    Listed(
        "README.md",
        f"({D.WARMUP_S} + {D.DURATION_S} s, {len(D.SCENARIOS)} scenarios,",
        "the defaults, from bench/core/defaults.py",
    ),
    Listed(
        "README.md",
        f"that is {_MIN:g} minutes per server, so `SERVER=all` ({_SERVERS} servers) takes about"
        f" {_MIN * _SERVERS / 60:g} hours",
        "the defaults' arithmetic, computed here from bench/core/defaults.py and servers/",
    ),
    Listed(
        "README.md",
        "took 2 min 16 s on this project's machine, a rebuild with nothing changed 0.5 s",
        "`time make images SERVER=granian,gunicorn-sync` (needs the Docker engine, minutes)",
    ),
    Listed(
        "README.md",
        "takes about 37 minutes on this project's 2-CPU machine (2,230 s measured by CI in a"
        " fresh clone, set-up included)",
        "CI's time of .ci/run in a fresh clone (`issues ci`): the suite cannot time itself",
    ),
    Listed(
        "README.md",
        "the build took 11 min 23 s for `3.14t` and 7 min 34 s for `3.14` here",
        "`/usr/bin/time bash bench/python-build.sh 3.14t`, then `3.14` (683.06 s and 454.39 s"
        " on 2026-11-26; minutes of CPU, needs the network)",
    ),
    Listed(
        "README.md",
        "`3.13t` took 6 min 53 s and `3.13` about 8 minutes",
        "`bash bench/python-build.sh 3.13t` and `3.13` run at once, timed from their logs"
        " (minutes of CPU, needs the network)",
    ),
    Listed(
        "README.md",
        "the oha build alone takes 5 to 9 minutes",
        "`make setup`'s cargo build of oha, timed on fresh clones (minutes, needs the network)",
    ),
    # docs/containers.md
    Listed(
        "containers.md",
        "took **2 min 16 s** (base 67 s, granian 50 s,",
        "`time make images SERVER=granian,gunicorn-sync` (needs the Docker engine, minutes)",
    ),
    Listed(
        "containers.md",
        "a rebuild with nothing changed **0.5 s**; after an edit of `app_common/` **9.4 s**",
        "`time make images` after no change and after an edit (needs the Docker engine)",
    ),
    Listed(
        "containers.md",
        "changed `app_common/` **13.3 s** for both images",
        "`time make images` after a merge (needs the Docker engine)",
    ),
    Listed(
        "containers.md",
        "after a new base (53 s), the interpreter's image took 15 s (a 306 MB context) and"
        " gunicorn-gthread's on it 36 s",
        "`make images SERVER=gunicorn-gthread PYTHON=3.14t` after a base with libpq5, its"
        " progress lines (needs the Docker engine and the built interpreter, minutes)",
    ),
    Listed("containers.md", "SIGKILL after 10 s", "the stop timeout of bench/host (a rule)"),
    Listed(
        "containers.md",
        "(one trial each, 3 s at c=10,",
        "the command below it states the duration (a rule of that run)",
    ),
    Listed(
        "containers.md",
        "| run | server | scenario | workers | req/s |",
        "records of `make bench ... RUNTIME=docker CPUS=1|0.5 MEMORY=512m` (the command above"
        " the table), a session that needs the Docker engine and images: not in the reference",
        block=True,
    ),
    Listed(
        "containers.md",
        "throttled in 30 of 32 periods, 1.5 s of the 3 s window)",
        "the same records as the table above (its granian /plaintext row at CPUS=0.5)",
    ),
    # docs/method.md
    Listed("method.md", f"per scenario a {D.PRIMER_S} s primer", "defaults.PRIMER_S"),
    Listed("method.md", "a watchdog checks every 0.5 s", RULE),
    Listed("method.md", "a stub that answers after 100 ms", "the scenario's path `ms=100`"),
    Listed(
        "method.md",
        "a 10 ms wait in the worker: one sync worker carries at most 100 req/s",
        "the scenario's path `ms=10` and its arithmetic (1 s / 10 ms)",
    ),
    Listed(
        "method.md",
        "8 concurrent 400 ms upstream calls",
        "the parameters of tests/integration/test_cooperative.py",
    ),
    Listed(
        "method.md",
        "**`ss` started twice per 0.5 s sample** (TIME_WAIT and the accept queue, ~4 ms of CPU",
        "the sampling period (a rule) and a process start's cost, timed when netlink replaced"
        " `ss` (the old code is gone: nothing left to re-run)",
    ),
    Listed(
        "method.md",
        "kernel ~1 µs each: the listing is spaced to take at most 1 % of a core",
        "the cost per socket timed when the listing was spaced (bench/observe), and the bound"
        " that spacing keeps (a rule)",
    ),
    Listed(
        "method.md", "shorter than their 60 s", "the kernel's TIME_WAIT length (TCP_TIMEWAIT_LEN)"
    ),
    Listed(
        "method.md",
        "~30 ms of CPU): now one psql session",
        "a psql start timed when the console session replaced it (the old code is gone)",
    ),
    Listed(
        "method.md",
        "0.08 ms), and re-listed every 2 s",
        "a children-list read timed when it replaced the /proc scan, and the re-list period"
        " (a rule)",
    ),
    Listed(
        "method.md",
        "single 5 s runs of the same arm vary by up to 2×, so the ratios cannot resolve 5 %",
        "`make overhead` on this shared machine (minutes of load; 'No figure of it is copied"
        " here', the doc says: these bound what it can show)",
    ),
    Listed(
        "method.md",
        "the 3 s AI API), history (`/queries?n=5`), voice (`/upstream?ms=1000`), then 1 s of"
        " think time",
        "locust/saas.py's parameters (source 000's mix)",
    ),
    Listed("method.md", "(2 significant digits above 100 ms)", "Locust's bucket rule"),
    # docs/own-app.md
    Listed("own-app.md", "`CONN_MAX_AGE` is 60 s", "the example's Django setting"),
    # docs/production.md
    Listed("production.md", "(100 ms) under", "the kernel's default cpu.cfs_period_us"),
    Listed(
        "production.md",
        "within 2 s of the signal), `p99_after_ms`,",
        "the lifecycle record's definitions (bench/report/lifecycle rules)",
    ),
    Listed(
        "production.md",
        "`recovery_s` (until every later half second had ≥ 99 % of its arrivals answered 2xx",
        "the lifecycle record's definitions (bench/observe/lifecycle.py: HEALTHY_SHARE)",
    ),
    Listed(
        "production.md",
        f"(`RATE`, default {D.SOAK_RATE} req/s, about source 002's 100 users) for `DURATION`"
        f" (default {D.SOAK_DURATION_S} s,",
        "defaults.SOAK_RATE and SOAK_DURATION_S",
    ),
    Listed(
        "production.md",
        "(every catalog server at 300 req/s on `/db`, 20 s, reload at 10 s), `recycle` (every"
        " catalog server at 300 req/s, 20 s,",
        "the study files studies/reload.toml and studies/recycle.toml",
    ),
    # docs/statistics.md
    Listed("statistics.md", "req/s and p99 with their 95 % intervals", RULE),
    Listed(
        "statistics.md",
        "an order-statistic interval over them was about 8× too narrow",
        "the block-bootstrap coverage study behind bench/report/stats.within_run_interval"
        " (the 89 % and 66 % below are its current form)",
    ),
    Listed("statistics.md", "by 5 % whatever the dependence", RULE),
    Listed(
        "statistics.md",
        "at one thread, 1.08× [0.97–1.19] after 64 rounds, the whole 20-minute budget,",
        "make tune SERVER=gunicorn-gthread SCENARIO=db CONCURRENCY=50 BUDGET=20 in a fresh clone"
        " at a80da47 (2026-11-26, quiet): its progress lines; 20 minutes of load, not re-runnable"
        " in the suite",
    ),
    Listed("statistics.md", "the interval excludes 1.00×", RULE),
    Listed(
        "statistics.md",
        "(repeats differ by 0.02 %)",
        "repeats of a fixed-rate point in the reference's records (oha's pacing); no command"
        " prints it",
    ),
    Listed(
        "statistics.md",
        "(0.8, 0.9, 0.95, 1.0, 1.05, 1.1, 1.25 ×)",
        "defaults.CAPACITY_KNEE",
    ),
    Listed("statistics.md", "differed by 7 %, each interval missing", DESIGN),
    Listed("statistics.md", "single 5 s steps near the knee flipped", DESIGN),
    Listed("statistics.md", "both capacities' 97.5 % intervals", RULE),
    Listed("statistics.md", "an equivalence margin, ±5 %", RULE),
    Listed(
        "statistics.md",
        "within 0.5–6 % (two-sided: a 10 % test",
        "the bounds of tests/bench/test_stats.py (rules of the test)",
    ),
    Listed("statistics.md", "(and ≥ 30 % without the correction)", "a bound of test_stats.py"),
    Listed("statistics.md", "a 10 % test (the threshold", "a mutant of test_mutants.py"),
    Listed("statistics.md", "| what | result |", STATS, block=True),
    Listed("statistics.md", "run (89 %): read it as a floor", STATS),
    Listed(
        "statistics.md",
        "deviation of about 10 % of log req/s over trials (the median over the reference's"
        " points; the 90th percentile is 34 %)",
        "the per-point sd of ln req/s over the reference's records (no command prints it yet:"
        " bench/report/stability.py's table holds the per-point figures)",
    ),
    Listed("statistics.md", "| trials | 10 % | 20 % | 30 % | 50 % |", STATS, block=True),
    Listed("statistics.md", "a 30 % difference is separated 9 times in 10", STATS),
    Listed(
        "statistics.md",
        f"({D.WARMUP_S} + {D.DURATION_S} s, {len(D.SCENARIOS)} scenarios × {len(D.CONCURRENCY)}"
        f" concurrencies) {_MIN:g} min per server",
        "the defaults' arithmetic, computed here",
    ),
    Listed("statistics.md", "separates 20 % differences 19 times in 20", STATS),
    Listed(
        "statistics.md",
        f"is within ±{D.AUTO_TARGET:.0%}".replace("%", " %"),
        "defaults.AUTO_TARGET",
    ),
    Listed("statistics.md", "more often than 5 %", RULE),
    Listed(
        "method.md",
        f"(over {KERNEL_BUSY_PERCENT:g} % of a CPU through the run)",
        "bench.observe.foreign.KERNEL_BUSY_PERCENT, a stated bound",
    ),
    Listed(
        "method.md",
        f"more than **{THRESHOLD_PERCENT:g} % of one CPU,",
        "bench.observe.foreign.THRESHOLD_PERCENT, a stated bound",
    ),
    Listed(
        "records.md",
        f"(true above {THRESHOLD_PERCENT:g} % of a",
        "bench.observe.foreign.THRESHOLD_PERCENT, a stated bound",
    ),
    Listed(
        "statistics.md",
        "at its default margin ±5 % and α = 0.05",
        "defaults.AUTO_MARGIN_PCT and decision.ALPHA, stated defaults",
    ),
    Listed(
        "statistics.md",
        f"Runs started less than {CLOSE_S:g} s apart",
        "bench.report.variance.CLOSE_S, a stated design value",
    ),
    Listed(
        "README.md",
        f"a plan longer than {CONFIRM_ABOVE_S // 3600} hours",
        "bench.core.variables.CONFIRM_ABOVE_S, the bound CONFIRM=1 lifts",
    ),
    Listed(
        "variables.md",
        f"run a plan longer than {CONFIRM_ABOVE_S // 3600} hours",
        "bench.core.variables.CONFIRM_ABOVE_S, the bound CONFIRM=1 lifts",
    ),
    Listed("statistics.md", "widened to reach 1.00× where the", RULE),
    Listed(
        "statistics.md",
        "Locust's p99 at 3,000 ms in every trial",
        "an example of a capped figure (the reference's Locust points, issue 36), not a result",
    ),
    Listed(
        "statistics.md",
        '"equivalent within ±`MARGIN`" (5 % by default)',
        "defaults.AUTO_MARGIN_PCT, a stated default",
    ),
    Listed(
        "statistics.md",
        "±MARGIN** (5 %): TOST",
        "defaults.AUTO_MARGIN_PCT, a stated default",
    ),
    Listed(
        "statistics.md",
        "decided in 12 round(s), 9.4 min: granian",
        "an example of the line's form, not a measurement (the real lines are generated)",
    ),
    Listed(
        "statistics.md",
        "flagged 29 % of simulated 3-trial points at a quiet sd of 0.07;",
        "the old rule over tests/bench/test_stability.py's seeded simulation (that code is gone)",
    ),
    Listed("statistics.md", "holds this one to at most 5 % there", RULE),
    Listed(
        "statistics.md",
        "race (N = 100) a pair 1.27× apart stayed undecided after 9 rounds at a paired t of 7.5",
        "`make bench SERVER=granian,gunicorn-sync,uvicorn,uwsgi SCENARIO=db CONCURRENCY=50"
        " DURATION=5 TRIALS=auto BUDGET=30` with the engine before the look schedule (a 30-min"
        " race: the records are not kept in the repo)",
    ),
    Listed(
        "statistics.md",
        'comes out "separated" in at most 5 % of 400 races',
        "the seeded simulations of tests/bench/test_decision.py (printed by `python -m"
        " bench.report.decision`; they run in that test, which holds the bounds)",
        block=True,
    ),
    Listed(
        "statistics.md",
        "a 1 s freeze of the server",
        "tests/integration/test_oha.py's freeze (its parameter)",
        block=True,
    ),
    Listed(
        "statistics.md",
        f"no request fails and ≥ {D.CAPACITY_MIN_ACHIEVED:.0%}".replace("%", " %"),
        "defaults.CAPACITY_MIN_ACHIEVED",
        block=True,
    ),
    Listed(
        "method.md",
        f"at least {D.CAPACITY_MIN_ACHIEVED:.0%} of the rate back".replace("%", " %"),
        "defaults.CAPACITY_MIN_ACHIEVED (a WebSocket step passes as an HTTP one does)",
    ),
    Listed(
        "method.md",
        f"connections that fit in {WS_MEMORY_LIMIT_MB:,} MB at that slope",
        "bench.studies.metrics.WS_MEMORY_LIMIT_MB, the declared limit held_in_limit assumes",
    ),
    # docs/studies.md
    Listed(
        "studies.md",
        "| `NAME` | source | what runs | about",
        "each study's parameters (studies/*.toml) and the wall clock of one trial, timed with"
        " `make study NAME=<study> TRIALS=1` here (root, minutes to an hour each)",
        block=True,
    ),
    Listed(
        "studies.md",
        "| `NAME` | what runs | about |",
        "each study's parameters (studies/*.toml) and the wall clock of one trial, timed with"
        " `make study NAME=<study> TRIALS=1` here (root, minutes to an hour each)",
        block=True,
    ),
    # docs/variables.md
    Listed(
        "variables.md",
        f"{D.TRIALS} separate a 30 % difference 9 times in 10",
        STATS,
    ),
    Listed(
        "variables.md",
        f"is within ±{D.AUTO_TARGET:.0%}".replace("%", " %"),
        "defaults.AUTO_TARGET",
    ),
)


# The previous reference's rendered text, kept with its records (tests/fixtures/reference-2026-11,
# the unit tests' captured output) while make reference answers the campaign's questions: the
# docs' figures from studies it has not asked again still cite it.
PREVIOUS = ROOT / "tests" / "fixtures" / "reference-2026-11"


def _reference() -> str:
    files = [
        path
        for where in (REFERENCE, PREVIOUS)
        for path in (where / "summary.md", *sorted((where / "details").glob("*.md")))
    ]
    return "\n".join(p.read_text() for p in files if p.exists())


def _study_cost() -> str:
    from bench.studies import cost

    return "\n".join(cost.cost_table())


# the generated texts a figure may come from, by the name a failure message gives
SOURCES: dict[str, Callable[[], str]] = {
    "results/reference/summary.md and details/*.md": _reference,
    "python -m bench.studies.cost": _study_cost,
}


@cache
def generated(name: str) -> str:
    """The text of one generated source (read or generated once per session)."""
    return SOURCES[name]()


def _blank(match: re.Match[str]) -> str:
    return re.sub(r"[^\n]", " ", match.group(0))


def prose(text: str) -> str:
    """The text with code blocks, inline code and link targets blanked, offsets kept."""
    text = re.sub(r"```.*?```", _blank, text, flags=re.S)
    text = re.sub(r"`[^`\n]*`", _blank, text)
    return re.sub(r"\]\([^)\s]*\)", _blank, text)


@dataclass(frozen=True)
class Figure:
    """One typed figure: its text (`12 %`), its number and unit, where it is."""

    number: str
    unit: str
    start: int
    end: int
    line: int

    @property
    def text(self) -> str:
        """The figure as the failure message quotes it."""
        return f"{self.number} {self.unit}"


def _table_figures(text: str) -> list[Figure]:
    """The bare numbers of table cells whose column header names a unit (`| req/s |`)."""
    found, header, offset = [], None, 0
    for number, line in enumerate(text.splitlines(keepends=True), start=1):
        cells = line.rstrip("\n").split("|")
        if not line.startswith("|"):
            header = None
        elif header is None:
            header = cells
        elif not set(line.strip()) <= set("|-: "):
            position = offset
            for column, cell in enumerate(cells):
                heading = header[column] if column < len(header) else ""
                unit = re.search(r"(?<![\w/])(req/s|ms|MB|%|min|s)(?![\w/])", heading)
                bare = re.match(rf"\s*\(?({NUMBER})(?=[\s,)]|$)", cell)
                if unit and bare:
                    start = position + bare.start(1)
                    found.append(
                        Figure(
                            bare.group(1), unit.group(1), start, start + len(bare.group(1)), number
                        )
                    )
                position += len(cell) + 1
        offset += len(line)
    return found


def find_figures(text: str) -> list[Figure]:
    """Every figure with its unit in a markdown text, outside code: typed with its unit, or
    a bare number in a table column whose header names the unit."""
    clean = prose(text)
    typed = [
        Figure(
            m.group(1),
            m.group(2) or m.group(3),
            m.start(),
            m.end(),
            text.count("\n", 0, m.start()) + 1,
        )
        for m in FIGURE.finditer(clean)
    ]
    starts = {f.start for f in typed}
    tables = [f for f in _table_figures(clean) if f.start not in starts]
    return sorted(typed + tables, key=lambda f: f.start)


def figures(text: str) -> list[str]:
    """Every figure of a text as 'number unit'."""
    return [f.text for f in find_figures(text)]


def words(text: str) -> set[str]:
    """The distinctive words of a text (lower case, 4+ characters, not COMMON)."""
    found = re.findall(r"[a-z][a-z0-9_\-]{3,}", text.lower())
    return {w for w in found if w not in COMMON}


def context(text: str, start: int, end: int, chars: int = CONTEXT_CHARS) -> set[str]:
    """The whole words around a span of a text (a word the window cuts is dropped)."""
    window = text[max(0, start - chars) : end + chars]
    return words(re.sub(r"^\S*|\S*$", "", window))


def found_in(figure: Figure, around: set[str], source: str) -> bool:
    """The figure, with its unit, in `source` with CONTEXT_WORDS of `around` next to it."""
    spaced = r"\s?" if figure.unit in ("×", "%") else r"\s"
    pattern = rf"(?<![\d,.]){re.escape(figure.number)}{spaced}{re.escape(figure.unit)}(?![\w/])"
    return any(
        len(around & context(source, m.start(), m.end(), CONTEXT_CHARS * 3 // 2)) >= CONTEXT_WORDS
        for m in re.finditer(pattern, source)
    )


def listed_spans(doc: str, text: str, listed: tuple[Listed, ...]) -> dict[Listed, list[range]]:
    """Where each of the doc's LISTED entries matches in its text."""
    spans: dict[Listed, list[range]] = {}
    for entry in listed:
        if entry.doc != doc:
            continue
        pattern = r"\s+".join(re.escape(part) for part in entry.text.split())
        found = []
        for m in re.finditer(pattern, text):
            end = m.end()
            if entry.block:
                blank = re.search(r"\n\s*\n", text[m.end() :])
                end = m.end() + blank.start() if blank else len(text)
            found.append(range(m.start(), end))
        spans[entry] = found
    return spans


def unsourced(doc: str, text: str, listed: tuple[Listed, ...] = LISTED) -> list[str]:
    """A line per figure of the doc with no source and per LISTED entry that covers none."""
    spans = listed_spans(doc, text, listed)
    used: set[Listed] = set()
    problems = []
    for figure in find_figures(text):
        covering = [e for e, where in spans.items() if any(figure.start in r for r in where)]
        if covering:
            used.update(covering)
            continue
        around = context(text, figure.start, figure.end)
        if any(found_in(figure, around, generated(name)) for name in SOURCES):
            continue
        problems.append(
            f"{doc} line {figure.line}: figure '{figure.text}' not found with its unit and the"
            f" words around it ({', '.join(sorted(around)[:6])}) in {' or '.join(SOURCES)};"
            " generate it or add it to LISTED in tests/docs/test_docs.py with the command"
            " that produced it and why the test cannot re-run it"
        )
    for entry, where in spans.items():
        if entry not in used:
            state = "covers no figure" if where else "is not in the text"
            problems.append(f"{doc}: LISTED entry {entry.text!r} {state}; remove or update it")
    return problems


def test_the_readme_fits_in_200_lines() -> None:
    """What it answers, the two commands, the questions and where the answers are: no more."""
    assert len((ROOT / "README.md").read_text().splitlines()) <= 200


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_typed_figure_has_a_source(doc: Path) -> None:
    """A figure quoted in prose is in a generated text with its unit and context, or listed."""
    problems = unsourced(doc.name, doc.read_text())
    assert problems == [], "\n".join(problems)


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_links_stay_inside_the_repository_and_exist(doc: Path) -> None:
    """Every relative link of the docs points at a file of this repository."""
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", doc.read_text()):
        if "://" in target:
            continue
        path = (doc.parent / target).resolve()
        assert path.is_relative_to(ROOT), f"{doc.name}: {target} leaves the repository"
        assert path.exists(), f"{doc.name}: {target} does not exist"


def test_figures_are_read_with_their_units() -> None:
    """Durations, ratios, shares and rates are figures; status codes and rules with × are not."""
    text = "granian: 98,765.4 req/s, 3.7× faster, ±5 %, 2 min 16 s, 757 s; 502s, 2×CPU, 2xx"
    assert figures(text) == ["98,765.4 req/s", "3.7 ×", "±5 %", "2 min 16 s", "757 s"]


@pytest.mark.parametrize(
    ("doc", "figure", "changed"),
    [
        ("studies.md", "3.33 %", "3.34 %"),  # from the reference's studies section
        ("studies.md", "54.1 min", "55.1 min"),  # from python -m bench.studies.cost
        ("README.md", "2,230 s", "2,231 s"),  # listed: CI's time of .ci/run
    ],
)
def test_a_changed_figure_fails_with_an_actionable_line(
    doc: str, figure: str, changed: str
) -> None:
    """A doc's figure typed one digit off fails, naming the doc, its line and the figure (and,
    for a listed one, the entry that no longer matches)."""
    text = next(p for p in DOCS if p.name == doc).read_text()
    assert text.count(figure) == 1
    assert unsourced(doc, text) == []
    problems = unsourced(doc, text.replace(figure, changed))
    line = text[: text.index(figure)].count("\n") + 1
    mine = [p for p in problems if p.startswith(f"{doc} line {line}: figure '{changed}' not")]
    assert len(mine) == 1, problems
    assert "generate it or add it to LISTED in tests/docs/test_docs.py" in mine[0]
    for entry in (e for e in LISTED if e.doc == doc and figure in e.text):
        stale = f"{doc}: LISTED entry {entry.text!r} is not in the text; remove or update it"
        assert stale in problems


def test_a_figure_needs_its_unit_and_its_words_in_the_generated_text() -> None:
    """A figure of the reference with another unit, or the same figure in another context,
    has no source."""
    reference = generated("results/reference/summary.md and details/*.md")
    match = re.search(r"(\d[\d,]*) req/s", reference)
    assert match
    number = match.group(1)
    around = context(reference, match.start(), match.end())
    assert len(around) >= CONTEXT_WORDS
    line = " ".join(sorted(around))
    assert unsourced("x.md", f"{line}: {number} req/s.\n") == []
    assert unsourced("x.md", f"{line}: {number} MB.\n") != []
    assert unsourced("x.md", f"quantum chromodynamics lattice: {number} req/s.\n") != []


def test_a_stale_listed_entry_fails() -> None:
    """A LISTED entry whose text or figure has gone is reported, so the list stays true."""
    entry = Listed("x.md", "the first 17 minutes", RULE)
    assert unsourced("x.md", "the first 17 minutes here\n", (entry,)) == []
    assert "is not in the text" in unsourced("x.md", "gone\n", (entry,))[0]
    assert (
        "covers no figure"
        in unsourced("x.md", "the first 17 minutes\n", (Listed("x.md", "the first", RULE),))[-1]
    )
