"""Make variables as declarative data: the one list of what a user may set, and how.

Input: bench/core/defaults.py, the declarations on disk (servers/, studies/, bench/load's
source, read without importing it). Output: VARIABLES, one Variable per make variable: its
parser (raw text -> value, or UsageError in one line naming the valid choices), its CLI flag,
the commands that take it, its bounds, the Options field it sets when it needs no rule of its
own, and the line `make help` prints; RULES, the rules between two variables, each blaming
the variable the user set; command_rules(), what a command asks of its variables together.
Standard library only: the pre-check (bench/precheck.py) runs all of it with the system's
python3 before anything is installed, and the harness (bench/cli) runs the same again.
Adding a make variable is one entry here and, when the harness reads it, one field of
bench/core/plan.Options (docs/development.md).
"""

from __future__ import annotations

import ast
import contextlib
import difflib
import functools
import os
import platform
import re
import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from bench.core import defaults, pythons, scenario, studyfile, validate
from bench.core.protocol import HTTP1, PROTOCOLS
from bench.core.registry import (
    CPUS_VALUE,
    FLAVORS,
    FRAMEWORK,
    RAW,
    RAW_SCENARIOS,
    ROOT,
    load_all,
    server_ids,
)
from bench.core.validate import (
    UsageError,
    validate_choice,
    validate_choices,
    validate_cpus,
    validate_int,
    validate_int_list,
    validate_memory,
    validate_switch,
    validate_target,
)

# The commands a run variable goes to: make bench (and compose-bench), capacity, soak.
RUN = ("run", "capacity", "soak")
# ... and make serve, which starts a server and no load.
SERVE = (*RUN, "serve")
# make noise (python -m bench noise) takes these of make bench's, with defaults of its own.
NOISE = "noise"
# make tune (python -m bench tune) takes these of make bench's, with KNOBS and OBJECTIVE.
TUNE = "tune"
KINDS = ("int", "switch")
# Every command `python -m bench` runs for a make target, and the targets that run none (their
# variables still checked: an unknown one or an injection is refused there too).
COMMANDS = ("run", "capacity", "soak", "serve", "overhead", "study", "report", "compare")
COMMANDS += ("export", "images", NOISE, TUNE, "remote")
# make reference (python -m bench reference): reference.toml's campaign (bench/core/campaign.py)
REFERENCE = "reference"
COMMANDS += (REFERENCE,)
# make remote runs make bench on another machine: make bench's variables, checked here as
# make bench's, and its own (HOST), which stay here.
REMOTE = "remote"
# Values a user may give that the harness takes from elsewhere: RUNTIME=compose is make
# compose-bench's own (the servers in its containers), never a user's choice.
USER_RUNTIMES = ("native", "docker")
PROXIES = ("none", "nginx", "alb")
NETWORKS = ("host", "bridge")
LIFECYCLES = ("reload",)  # bench.observe.lifecycle.EVENTS
FORMATS = ("csv", "json")  # bench.report.export.FORMATS
# OBJECTIVE= of make tune: closed-loop req/s (higher is better) or p99 (lower is better);
# capacity is declared so that it is refused with its reason, not as an unknown value.
OBJECTIVES = ("rps", "p99", "capacity")
# KNOBS=: "workers=1,2,4 threads=1,2,4,8": a knob's name, then its values (whole numbers,
# "cpus" or "<k>*cpus", as server.toml's tune lists)
KNOB_ITEM = re.compile(r"([a-z_]+)=([0-9a-z*,]+)")
ARCHES = {"amd64": "amd64", "x86_64": "amd64", "arm64": "arm64", "aarch64": "arm64"}
APP_KINDS = ("wsgi", "asgi")  # bench.core.app.KINDS
# MACHINE=: a label in records and file names
MACHINE_LABEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,39}")
# CPU_QUOTA=: a cgroup's cpu.max from 1 ms per 100 ms period to 1024 CPUs (bench.host.cgroup)
CPU_QUOTA_RANGE = (0.01, 1_024.0)
# FAIL_BELOW= and FAIL_ABOVE=: make compare's gate, HEAD/BASE ratios of req/s (a slowdown is
# below 1) and of p99 (a slowdown is above 1)
FAIL_BELOW_RANGE = (0.01, 1.0)
FAIL_ABOVE_RANGE = (1.0, 100.0)
# MARGIN=: TRIALS=auto's equivalence margin in percent (two points within it are "the same")
MARGIN_RANGE = (1, 50)
# KNOBS= (make tune): the bounds of the knobs no make variable sets (server.toml's keepalive
# and timeout, both seconds); workers, threads, connections and backlog take theirs from
# WORKERS, THREADS, CONNECTIONS and BACKLOG (Variable.knob), one declaration for both.
KNOB_SECONDS = {"keepalive": (1, 3_600), "timeout": (1, 86_400)}
# <k>*cpus: k within 1..16. The declarations use at most 4*cpus (gunicorn's 2*cpus+1 rule
# lies below it); evaluated on this host it must also fall within the knob's bounds, and 16
# per CPU is the worst case the same search may meet on a bigger host.
KNOB_CPU_FACTOR = 16
# Values per knob and configurations per search (the product): a race of more cannot finish
# within any BUDGET (1,440 minutes at most) at one round of a few seconds each.
KNOB_VALUES_MAX = 32
KNOB_CONFIGS_MAX = 1_024
# A plan longer than this needs CONFIRM=1: a typo in TRIALS or DURATION must not start days
CONFIRM_ABOVE_S = 24 * 3600
# The measuring commands it holds for (make remote: make bench's plan, checked as "run"; make
# reference: MINUTES bounds a session to 24 h), and what makes each plan smaller.
CONFIRMED = ("run", "soak", "capacity", "study", NOISE, TUNE)
PLAN_SIZE = {
    "capacity": "SERVER/SCENARIO/TRIALS/CAPACITY_BUDGET",
    "study": "NAME/TRIALS/DURATION/BUDGET",
    NOISE: "ROUNDS/STARTS/RUNS/DURATION",
    TUNE: "SERVER/BUDGET",
}
# Make's own and the shell's variables that reach make's command line legitimately.
MAKE_OWN = ("MAKEFLAGS", "MAKEOVERRIDES", "MFLAGS", "MAKELEVEL", "-*-command-variables-*-")


def _ints(values: tuple[int, ...]) -> str:
    return ",".join(map(str, values))


# -- the load tools, read from bench/load's source (importing them needs psutil) --------------


@functools.cache
def load_tools() -> dict[str, dict[str, object]]:
    """Each selectable load tool: its ClassVars (name, open_loop, default, variables, drives),
    read from each bench/load module's `TOOL = <class>` without importing it (held to
    bench.load by tests/bench/test_variables.py)."""
    found: dict[str, dict[str, object]] = {}
    for path in sorted((ROOT / "bench" / "load").glob("*.py")):
        tree = ast.parse(path.read_text())
        tool = next(
            (
                node.value.id
                for node in tree.body
                if isinstance(node, ast.Assign)
                and [getattr(t, "id", None) for t in node.targets] == ["TOOL"]
                and isinstance(node.value, ast.Name)
            ),
            None,
        )
        attrs: dict[str, object] = {}
        for cls in (n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == tool):
            for node in cls.body:
                if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
                    continue
                value = node.value
                if isinstance(value, ast.Attribute) and value.attr.isupper():
                    attrs[node.target.id] = getattr(scenario, value.attr, None)  # scenario.URL
                elif value is not None:
                    with contextlib.suppress(ValueError):
                        attrs[node.target.id] = ast.literal_eval(value)
        if isinstance(attrs.get("name"), str) and attrs.get("selectable", True):
            found[str(attrs["name"])] = attrs
    # default first, then by name (as bench.load.names())
    return dict(sorted(found.items(), key=lambda item: (not item[1].get("default"), item[0])))


def load_names() -> list[str]:
    """The names LOAD= takes."""
    return list(load_tools())


def default_load(scenarios: Iterable[str] = ()) -> str:
    """The tool LOAD= means when unset (the one that declares itself the default); for
    scenarios it cannot drive, the one tool that drives them all (SCENARIO=websocket:
    the WebSocket generator), as bench.load.default_for."""
    tools = load_tools()
    default = next(n for n, t in tools.items() if t.get("default"))
    kinds = {scenario.SCENARIOS[s].needs for s in scenarios if s in scenario.SCENARIOS}
    if not kinds or kinds == {tools[default].get("drives")}:
        return default
    able = [n for n, t in tools.items() if {t.get("drives")} == kinds]
    return able[0] if len(able) == 1 and scenario.WS in kinds else default


def protocol_loads(name: str) -> tuple[str, ...]:
    """The tools that speak protocol `name` (their `protocols` ClassVar; http1 when unsaid)."""
    return tuple(n for n, t in load_tools().items() if name in t.get("protocols", (HTTP1,)))  # type: ignore[operator]


def open_loop_loads() -> tuple[str, ...]:
    """The tools that send a fixed arrival rate (RATE=)."""
    return tuple(n for n, t in load_tools().items() if t.get("open_loop"))


def rate_loads() -> tuple[str, ...]:
    """The tools RATE= can pace: the open-loop ones, and those a rate may replace their own
    schedule's (`paced`: wsload, messages/s over the echo route's connections)."""
    return tuple(n for n, t in load_tools().items() if t.get("open_loop") or t.get("paced"))


def url_loads() -> tuple[str, ...]:
    """The tools that request one URL over and over (APP='s routes need one)."""
    return tuple(n for n, t in load_tools().items() if t.get("drives") == scenario.URL)


def study_names() -> list[str]:
    """Every study NAME= takes (studies/*.toml)."""
    return studyfile.study_names()


# -- parsers: raw text -> value, or UsageError naming the valid choices -----------------------


def parse_int(name: str) -> Callable[[str], int]:
    """A whole number within the variable's declared bounds."""
    return lambda raw: validate_int(name.lower(), raw)


def parse_int_list(name: str) -> Callable[[str], tuple[int, ...]]:
    """A comma list of whole numbers within the variable's bounds."""
    return lambda raw: validate_int_list(name.lower(), raw)


def parse_switch(name: str) -> Callable[[str], bool]:
    """on/off or 1/0."""
    return lambda raw: validate_switch(name.lower(), raw)


def parse_one_of(name: str, valid: Callable[[], tuple[str, ...] | list[str]]) -> Callable:
    """Exactly one of the valid names."""
    return lambda raw: validate_choice(name.lower(), raw, tuple(valid()))


def parse_names(name: str, valid: Callable[[], list[str]]) -> Callable:
    """A comma list of valid names, or all."""
    return lambda raw: validate_choices(name.lower(), raw, list(valid()), allow_all=True)


def parse_trials(raw: str) -> int | None:
    """TRIALS: a whole number, or auto (None)."""
    if raw.strip().lower() == "auto":
        return None
    low, high = BY_NAME["TRIALS"].limits or (1, 1)
    try:
        int(raw.strip())
    except ValueError:
        raise UsageError(f"TRIALS={raw!r} is not a whole number ({low}..{high}) or auto") from None
    return validate_int("trials", raw)


def parse_arch(raw: str) -> str:
    """amd64/x86_64 -> amd64, arm64/aarch64 -> arm64."""
    try:
        return ARCHES[raw.strip()]
    except KeyError:
        hint = validate.case_hint(raw, ARCHES)
        raise UsageError(
            f"unknown ARCH {raw!r}; {hint}valid: {', '.join(sorted(ARCHES))}"
        ) from None


def host_arch() -> str:
    """This machine's arch as ARCH= names it (bench.host.arch.host_arch, standard library)."""
    machine = platform.machine().lower()
    return ARCHES.get(machine, machine)


def parse_cpu_quota(raw: str) -> float:
    """CPUs, any fraction, within a cgroup's bounds."""
    low, high = CPU_QUOTA_RANGE
    try:
        value = float(raw.strip())
    except ValueError:
        value = -1.0
    if not low <= value <= high:
        raise UsageError(
            f"CPU_QUOTA={raw!r} is not a number of CPUs in {low:g}..{high:g} (e.g. 0.5, 1, 1.5)"
        )
    return value


def _bounds(limits: tuple[float, float]) -> str:
    return f"{limits[0]:g}..{limits[1]:g}"


def parse_ratio(name: str, limits: tuple[float, float], what: str) -> Callable[[str], float]:
    """A ratio (a decimal number) within `limits`, inclusive: make compare's gate bounds."""

    def parse(raw: str) -> float:
        try:
            value = float(raw.strip())
        except ValueError:
            raise UsageError(
                f"{name}={raw!r} is not a number; give a ratio in {_bounds(limits)} ({what})"
            ) from None
        if not limits[0] <= value <= limits[1]:  # nan and inf too
            raise UsageError(f"{name}={raw.strip()} is out of range {_bounds(limits)} ({what})")
        return value

    return parse


def parse_app_kind(raw: str) -> tuple[str, ...]:
    """wsgi or asgi per APP entry, comma-separated."""
    return tuple(validate_choice("app_kind", k, APP_KINDS) for k in raw.split(","))


# Directories a result set never is (RESULTS, BASE, HEAD): a run writes its tree there (as
# root, into /) and a report reads every record below it (other checkouts' too) ...
SYSTEM_DIRS = ("/", "/home", "/tmp", "/var", "/var/tmp", "/root", "/opt", "/srv", "/mnt")
SYSTEM_DIRS += ("/media", "/snap")
# ... nor lies below: the system's own files (/lib is /usr/lib where /usr is merged).
SYSTEM_TREES = ("/etc", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
SYSTEM_TREES += ("/boot", "/dev", "/proc", "/sys", "/run")


def system_directory(name: str, raw: str) -> None:
    """UsageError when `raw` (resolved: symlinks and `..` followed) is a system directory or
    lies below one of the system's trees: never a result set."""
    path = Path(raw.strip() or ".").resolve()
    trees = {Path(t).resolve() for t in SYSTEM_TREES} | {Path(t) for t in SYSTEM_TREES}
    tree = next((t for t in sorted(trees) if path.is_relative_to(t)), None)
    if path in {Path(d) for d in SYSTEM_DIRS} or tree is not None:
        where = f"({path})" if tree is None or tree == path else f"(in {tree})"
        raise UsageError(
            f"{name}={raw!r} is a system directory {where}, never a result set; give a "
            f"directory of your own, e.g. {name}=results"
        )


def parse_result_set(name: str) -> Callable[[str], str]:
    """BASE, HEAD: one line naming a result set, never a system directory."""

    def parse(raw: str) -> str:
        value = parse_text(name)(raw)
        if value:
            system_directory(name, value)
        return value

    return parse


def parse_results(raw: str) -> Path:
    """A directory that exists or could be made, in a writable parent, never a system
    directory: checked without creating anything (the harness makes it when the run starts)."""
    path = Path(raw).absolute()
    if "\n" in raw or "\0" in raw:
        raise UsageError(f"RESULTS={raw!r} is not a usable directory name (a line break in it)")
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    # os.access says yes to root everywhere but on a read-only file system (or /proc, /sys)
    if (
        not probe.is_dir()
        or not os.access(probe, os.W_OK | os.X_OK)
        or os.statvfs(probe).f_flag & os.ST_RDONLY
        or probe.resolve().parts[1:2] in (("proc",), ("sys",))
    ):
        raise UsageError(f"RESULTS={raw!r} is not a writable directory ({probe} is not)")
    if raw.strip():
        system_directory("RESULTS", raw)
    return path


def parse_machine(raw: str) -> str:
    """A label of 1-40 letters, digits, '.', '_' or '-'."""
    if not MACHINE_LABEL.fullmatch(raw.strip()):
        raise UsageError(
            f"MACHINE={raw!r}: a label of 1-40 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    return raw.strip()


def parse_price(raw: str) -> dict[str, float]:
    """PRICE: `<arch or machine label>:<dollars per hour>`, comma-separated -> {name: price};
    an arch's other spelling (x86_64, aarch64) is its name (amd64, arm64)."""
    prices: dict[str, float] = {}
    for item in raw.split(","):
        name, _, value = item.strip().partition(":")
        try:
            price = float(value)
        except ValueError:
            price = -1.0
        if not MACHINE_LABEL.fullmatch(name) or not 0 < price < 1e6 or name in prices:
            raise UsageError(
                f"PRICE={raw!r}: give <arch or MACHINE label>:<dollars per hour>, each once, "
                f"comma-separated (e.g. PRICE=amd64:0.0416,arm64:0.0336); arches: "
                f"{', '.join(sorted(set(ARCHES.values())))}"
            )
        prices[ARCHES.get(name.lower(), name)] = price
    return prices


# HOST=: ssh's destination, [user@]host; never an option (a leading '-') nor a command
SSH_HOST = re.compile(
    r"([a-z_][a-z0-9_.-]{0,31}@)?([A-Za-z0-9][A-Za-z0-9.-]{0,252}|\[[0-9A-Fa-f:.]+\]"
    r"|[0-9A-Fa-f]{0,4}:[0-9A-Fa-f:.]+)"  # IPv6, in brackets or bare (::1, fe80::1)
)


def parse_host(raw: str) -> str:
    """HOST: [user@]host, a name or an address (IPv6 bare or in brackets: ssh gets it bare,
    bench.host.ssh.destination)."""
    if not SSH_HOST.fullmatch(raw.strip()):
        raise UsageError(
            f"HOST={raw!r}: give the machine ssh reaches as [user@]host (e.g. HOST=admin@10.0.0.7, "
            "HOST=graviton from ~/.ssh/config)"
        )
    return raw.strip()


def parse_text(name: str) -> Callable[[str], str]:
    """Free text of one line (a path, a module): the harness reads what it names."""

    def parse(raw: str) -> str:
        if "\n" in raw or "\0" in raw:
            raise UsageError(f"{name}={raw!r} holds a line break; give one line")
        return raw.strip()

    return parse


def parse_margin(raw: str) -> float:
    """MARGIN: percent (whole) -> a fraction."""
    return validate_int("margin", raw) / 100


def host_cpus() -> int:
    """The CPUs this process may run on (its affinity set; os.cpu_count() where there is none):
    what `cpus` in a search space means on this host (bench.harness.tuner)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # no sched_getaffinity (macOS)
        return os.cpu_count() or 1


def knob_limits() -> dict[str, tuple[int, int]]:
    """Each server.toml knob's bounds: the variable that sets it declares them (WORKERS'
    1..256 holds for KNOBS=workers=), the knobs no variable sets have KNOB_SECONDS."""
    return {v.knob: v.limits for v in VARIABLES if v.knob and v.limits} | KNOB_SECONDS


def _knob_value(name: str, value: str, cpus: int) -> None:
    """One KNOBS value within its knob's bounds; `<k>*cpus` after evaluation on `cpus` CPUs
    and k within 1..KNOB_CPU_FACTOR (the worst case: the same search on a bigger host)."""
    bounds = knob_limits().get(name)
    if bounds is None:
        return  # no server declares this knob: tune_rules names the server's knobs
    low, high = bounds
    match = CPUS_VALUE.match(value)
    if match is None:
        if not low <= int(value) <= high:
            raise UsageError(f"KNOBS: {name}={value} is out of range {low}..{high}")
        return
    factor = int(match.group(1) or 1)
    if not 1 <= factor <= KNOB_CPU_FACTOR:
        raise UsageError(
            f"KNOBS: {name}={value}: k of <k>*cpus is 1..{KNOB_CPU_FACTOR} (k={factor})"
        )
    if not low <= factor * cpus <= high:
        raise UsageError(
            f"KNOBS: {name}={value} is {factor * cpus} on this host's {cpus} CPUs, out of "
            f"range {low}..{high}"
        )


def parse_knobs(raw: str) -> dict[str, tuple[str, ...]]:
    """KNOBS: "workers=1,2,4 threads=1,2" -> {knob: values}; the values whole numbers, "cpus"
    or "<k>*cpus", each within its knob's bounds (knob_limits), at most KNOB_VALUES_MAX per
    knob and KNOB_CONFIGS_MAX configurations (the knob names are checked against each
    server's by tune_rules)."""
    found: dict[str, tuple[str, ...]] = {}
    example = "KNOBS='workers=1,2,4 threads=1,2,4,8'"
    for item in raw.split():
        match = KNOB_ITEM.fullmatch(item)
        if match is None:
            raise UsageError(f"KNOBS: {item!r} is not <knob>=<values>; e.g. {example}")
        name, values = match.group(1), tuple(v for v in match.group(2).split(",") if v)
        bad = [v for v in values if not (v.isdigit() and int(v) > 0) and not CPUS_VALUE.match(v)]
        if bad or not values:
            raise UsageError(
                f"KNOBS: {name}={match.group(2)}: values are positive whole numbers, cpus or "
                f"<k>*cpus; e.g. {example}"
            )
        if name in found:
            raise UsageError(f"KNOBS names {name} twice; give each knob once")
        if len(values) > KNOB_VALUES_MAX:
            raise UsageError(
                f"KNOBS: {name} has {len(values)} values; at most {KNOB_VALUES_MAX} per knob"
            )
        for value in values:
            _knob_value(name, value, host_cpus())
        found[name] = values
    if not found:
        raise UsageError(f"KNOBS= names no knob; e.g. {example}")
    configurations = functools.reduce(lambda a, b: a * b, map(len, found.values()), 1)
    if configurations > KNOB_CONFIGS_MAX:
        raise UsageError(
            f"KNOBS: {' x '.join(str(len(v)) for v in found.values())} = {configurations} "
            f"configurations; at most {KNOB_CONFIGS_MAX} in one search"
        )
    return found


def parse_confirm(raw: str) -> bool:
    """CONFIRM: 1 says yes to a plan longer than a day."""
    return validate_switch("confirm", raw)


def parse_pytest_args(raw: str) -> str:
    """make test's arguments to pytest: split into words by the harness, never by a shell."""
    return parse_text("PYTEST_ARGS")(raw)


@dataclass(frozen=True)
class Variable:
    """One make variable: what it is, where it goes, and its parser."""

    name: str  # SERVER
    about: str  # what it does, one line for make help
    default: str  # as make help states it
    commands: tuple[str, ...] = RUN  # the `python -m bench` commands that take it
    flag: str | None = None  # the CLI option without "--"; None: the name, lower-case, "-"
    unset: str | None = None  # the CLI option's value when the variable is not set
    limits: tuple[int, int] | None = None  # a whole number's bounds (validate_int)
    # The plan.Options field it sets when it needs no rule of its own: validated by `kind`
    # alone (bench.cli.options.simple_options). None: a rule in bench/cli, or not a run option.
    field: str | None = None
    kind: str | None = None  # one of KINDS, with `field`
    # Why it cannot apply to a server running elsewhere (TARGET=): refused with it.
    local: str | None = None
    # raw text -> value, UsageError when it cannot be right; None: a whole number within
    # `limits`, or one line of text
    parser: Callable[[str], object] | None = None
    required_by: tuple[str, ...] = ()  # the commands that cannot run without it
    # When this other variable is set, it decides what the value may be (SCENARIO with APP
    # names the app's routes, read from its files): the value is checked there instead.
    unless: str | None = None
    # The server.toml knob it sets (WORKERS: workers): KNOBS= holds that knob to `limits` too.
    knob: str | None = None

    @property
    def option(self) -> str:
        """The CLI option: `--load-threads`."""
        return "--" + (self.flag or self.name.lower().replace("_", "-"))

    @property
    def dest(self) -> str:
        """The argparse attribute the option lands in: `load_threads`."""
        return self.option[2:].replace("-", "_")

    def parse(self, raw: str) -> object:
        """The value of `raw`, or UsageError in one line naming the valid choices."""
        if not raw.strip():
            raise UsageError(self.empty())
        if self.parser is not None:
            return self.parser(raw)
        if self.limits is not None:
            return validate_int(self.name.lower(), raw)
        return parse_text(self.name)(raw)

    def empty(self) -> str:
        """The one wording for a value set but empty, with the valid values where the
        parser names them ("SERVER= is set but empty; ... valid: daphne, ...")."""
        valid = f" ({self.limits[0]}..{self.limits[1]})" if self.limits else ""
        try:
            (self.parser or (lambda _: None))("")
        except UsageError as exc:
            text = str(exc)
            valid = "; " + text[text.index("valid:") :] if "valid:" in text else valid
        return f"{self.name}= is set but empty; unset it or give a value{valid}"


VARIABLES: tuple[Variable, ...] = (
    Variable(
        "SERVER",
        "server id, comma list, or all",
        defaults.SERVER,
        (*SERVE, "overhead", "images", NOISE, TUNE),
        unset=defaults.SERVER,
        parser=parse_names("SERVER", server_ids),
    ),
    Variable(
        "SCENARIO",
        "comma list of the scenarios below",
        ",".join(defaults.SCENARIOS),
        (*RUN, "overhead", NOISE, TUNE),
        parser=parse_names("SCENARIO", lambda: list(scenario.SCENARIOS)),
        unless="APP",
    ),
    Variable(
        "CONCURRENCY",
        "comma list of open connections; with LOAD=oha the pool the rate is sent from",
        f"{_ints(defaults.CONCURRENCY)}; with LOAD=oha: per rate",
        limits=(1, 10_000),
        commands=(*RUN, "overhead", NOISE, TUNE),
        parser=parse_int_list("CONCURRENCY"),
    ),
    Variable(
        "DURATION",
        "seconds per measured run",
        f"{defaults.DURATION_S} ({defaults.RACE_DURATION_S} with TRIALS=auto and make tune)",
        (*RUN, "study", "overhead", NOISE, TUNE),
        limits=(1, 86_400),  # make soak runs for hours
        field="duration_s",
        kind="int",
        unset=str(defaults.DURATION_S),
    ),
    Variable(
        "WARMUP",
        "seconds of warmup before each measurement",
        str(defaults.WARMUP_S),
        (*RUN, NOISE, TUNE),
        limits=(0, 600),
        field="warmup_s",
        kind="int",
        unset=str(defaults.WARMUP_S),
    ),
    Variable(
        "TRIALS",
        "measured trials per server/scenario/concurrency, or auto: several servers race "
        "(rounds of those still undecided until every adjacent pair is separated or "
        "equivalent within ±MARGIN), one server runs rounds until its 95 % interval of req/s "
        f"is within ±{defaults.AUTO_TARGET:.0%} (both within BUDGET); "
        f"make capacity: rounds of steps around the knee, each on a fresh server start "
        f"(default {defaults.CAPACITY_KNEE_TRIALS}; auto: two or more servers race their "
        "capacities, paired by round); make study: rounds of its arms (default: the study "
        "file's), auto: rounds until every check is decided (within BUDGET)",
        str(defaults.TRIALS),
        (*RUN, "study"),
        limits=(1, defaults.AUTO_MAX_TRIALS),
        unset=str(defaults.TRIALS),
        parser=parse_trials,
    ),
    Variable(
        "BUDGET",
        f"TRIALS=auto: minutes of rounds at most (at least {defaults.AUTO_MIN_TRIALS} trials "
        "run whatever it says; make capacity: rounds of the servers' knee steps); make tune: "
        "minutes per server's search; make study without TRIALS=auto: minutes per tuned arm's "
        "search",
        str(defaults.AUTO_BUDGET_MIN),
        ("run", "capacity", TUNE, "study"),
        flag="trials-budget",
        limits=(1, 1_440),
    ),
    Variable("ARCH", "amd64 or arm64", "this host's", (*SERVE, "images", TUNE), parser=parse_arch),
    Variable(
        "RESULTS",
        "directory for records and summary.md",
        defaults.RESULTS,
        (*RUN, "study", "report", "export", NOISE, TUNE),
        unset=defaults.RESULTS,
        parser=parse_results,
    ),
    Variable(
        "WORKERS",
        "a server's workers, where it has them",
        "server.toml",
        SERVE,
        limits=(1, 256),
        knob="workers",
    ),
    Variable(
        "THREADS",
        "threads per worker, where it has them",
        "server.toml",
        SERVE,
        limits=(1, 1_024),
        knob="threads",
    ),
    Variable(
        "CONNECTIONS",
        "connections per worker, where it has them",
        "server.toml",
        SERVE,
        limits=(1, 100_000),
        knob="connections",
    ),
    Variable(
        "BACKLOG",
        "the listen backlog, where it has one",
        "server.toml",
        SERVE,
        limits=(1, 65_535),
        knob="backlog",
    ),
    Variable(
        "LOAD_THREADS",
        "wrk threads",
        "half the CPUs, at least 1",
        (*RUN, "overhead", TUNE),
        limits=(1, 64),
    ),
    Variable(
        "SEED",
        "seed for the random server order",
        "random",
        (*RUN, "study", NOISE, TUNE),
        limits=(0, 2**31 - 1),
    ),
    Variable(
        "PROXY",
        "none, nginx (nginx from proxy/ in front of the server) or alb (nginx as a cloud "
        "balancer: 60 s upstream idle timeout, no retry)",
        defaults.PROXY,
        SERVE,
        unset=defaults.PROXY,
        parser=parse_one_of("PROXY", lambda: PROXIES),
    ),
    Variable(
        "KEEPALIVE",
        "on or off: client keep-alive, and nginx's upstream keep-alive",
        "on" if defaults.KEEPALIVE else "off",
        SERVE,
        unset="on" if defaults.KEEPALIVE else "off",
        parser=parse_switch("KEEPALIVE"),
    ),
    Variable(
        "UPSTREAM_KEEPALIVE",
        "on or off: nginx -> server keep-alive alone",
        "KEEPALIVE",
        SERVE,
        parser=parse_switch("UPSTREAM_KEEPALIVE"),
    ),
    Variable(
        "PROXY_TIMEOUT",
        "nginx's connect/read timeout in seconds",
        f"{defaults.PROXY_TIMEOUT_S}, nginx's own",
        SERVE,
        limits=(1, 600),
        unset=str(defaults.PROXY_TIMEOUT_S),
    ),
    Variable(
        "PIN",
        "1: load tool and server on separate CPUs",
        str(int(defaults.PIN)),
        (*SERVE, TUNE),
        unset="1" if defaults.PIN else "0",
        parser=parse_switch("PIN"),
    ),
    Variable(
        "LOAD",
        "wrk, locust (runs SCENARIO=saas), oha (open loop: RATE=) or wsload (SCENARIO="
        "websocket, websocket-push and websocket-idle: the one chosen for them when LOAD is "
        "unset)",
        "the load package's default tool (bench/load)",
        parser=parse_one_of("LOAD", load_names),
    ),
    Variable(
        "RATE",
        "LOAD=oha: comma list of offered requests/s, sent whatever the server does",
        "none",
        limits=(1, 1_000_000),
        parser=parse_int_list("RATE"),
    ),
    Variable(
        "LOCUST_WORKERS",
        "Locust worker processes (0: one local process)",
        str(defaults.LOCUST_WORKERS),
        limits=(0, 64),
        unset=str(defaults.LOCUST_WORKERS),
    ),
    Variable(
        "TARGET",
        "http://host:port of a server running elsewhere: only the load runs here",
        "none",
        parser=validate_target,
    ),
    Variable(
        "CPU_QUOTA",
        "CPUs the server may use (any fraction), a cgroup quota as containers set it, needs root",
        "none",
        parser=parse_cpu_quota,
    ),
    Variable(
        "RUNTIME",
        "native, or docker: the server under test in its image (make images first)",
        defaults.RUNTIME,
        (*SERVE, TUNE),
        unset=defaults.RUNTIME,
        parser=parse_one_of("RUNTIME", lambda: USER_RUNTIMES),
    ),
    Variable(
        "CPUS",
        "RUNTIME=docker: CPUs the container may use, docker's --cpus (e.g. 0.5, 1)",
        "none",
        (*SERVE, TUNE),
        parser=validate_cpus,
    ),
    Variable(
        "MEMORY",
        "RUNTIME=docker: the container's memory limit, docker's --memory (e.g. 512m, 1g)",
        "none",
        (*SERVE, TUNE),
        parser=validate_memory,
    ),
    Variable(
        "NETWORK",
        "RUNTIME=docker: host (the host's network) or bridge (a harness-made one, 198.19.0.0/16)",
        defaults.NETWORK,
        (*SERVE, TUNE),
        unset=defaults.NETWORK,
        parser=parse_one_of("NETWORK", lambda: NETWORKS),
    ),
    Variable(
        "LIFECYCLE",
        "reload: each server's own graceful reload mid-window (needs LOAD=oha RATE=)",
        "none",
        parser=parse_one_of("LIFECYCLE", lambda: LIFECYCLES),
    ),
    Variable(
        "PROTOCOL",
        "how the load talks to the server: "
        + "; ".join(f"{p.name} ({p.about})" for p in PROTOCOLS.values()),
        HTTP1,
        SERVE,
        unset=HTTP1,
        parser=parse_one_of("PROTOCOL", lambda: tuple(PROTOCOLS)),
    ),
    Variable(
        "PYTHON",
        "the interpreter of every server's venv, built here from a pinned CPython tarball: "
        "<minor> with the GIL, <minor>t free-threaded (--disable-gil), e.g. 3.14t; a server "
        "without wheels for it is refused with its reason ([pythons] in its server.toml); "
        "RUNTIME=docker: the server's image on it (make images PYTHON=<name>)",
        "the harness's python3",
        (*SERVE, "images", TUNE),
        parser=pythons.parse_python,
    ),
    Variable(
        "STREAMS",
        "PROTOCOL=h2c or h2: requests in flight on each connection at once (HTTP/2 streams)",
        "1",
        RUN,
        limits=(1, 1_000),
        field="streams",
        kind="int",
    ),
    Variable(
        "MESSAGE_BYTES",
        "SCENARIO=websocket and websocket-push: bytes per message (16 and more: a number and "
        "a send time lead each)",
        str(scenario.WS_BYTES),
        ("run",),
        limits=(16, 1_000_000),
        field="message_bytes",
        kind="int",
    ),
    Variable(
        "MESSAGE_RATE",
        "SCENARIO=websocket and websocket-push: messages per second on each connection "
        "(websocket-idle sends none)",
        str(scenario.WS_RATE),
        ("run",),
        limits=(1, 100_000),
        field="message_rate",
        kind="int",
    ),
    Variable(
        "RECYCLE",
        "requests per worker before the server's own recycling replaces it",
        "none",
        limits=(1, 10_000_000),
        field="recycle",
        kind="int",
        local="sets flags of a server started here",
    ),
    Variable(
        "APP",
        "your own app: <path or module>:<callable>, or a WSGI and an ASGI entry, comma-separated",
        "the built-in app (app_common)",
        SERVE,
        parser=parse_text("APP"),
    ),
    Variable(
        "APP_FLAVOR",
        "framework (app_common's Flask/Quart app) or raw (a WSGI callable / ASGI app with no "
        f"framework, serving {', '.join(RAW_SCENARIOS)} only): with both, the server's share "
        "of a request",
        FRAMEWORK,
        (*SERVE, "overhead", NOISE, TUNE),
        unset=FRAMEWORK,
        parser=parse_one_of("APP_FLAVOR", lambda: FLAVORS),
    ),
    Variable(
        "APP_ROUTES",
        "APP: TOML list of [[route]] (name, method, path, status, body, weight)",
        "routes.toml beside the app",
        SERVE,
        parser=parse_text("APP_ROUTES"),
    ),
    Variable(
        "APP_REQUIREMENTS",
        "APP: pinned requirements layered on each server's",
        "requirements.txt beside the app",
        SERVE,
        parser=parse_text("APP_REQUIREMENTS"),
    ),
    Variable(
        "APP_KIND",
        "APP: wsgi or asgi per entry, where it cannot be detected",
        "detected",
        SERVE,
        parser=parse_app_kind,
    ),
    Variable(
        "SOAK_INTERVAL",
        "make soak: seconds between RSS samples",
        f"{defaults.SOAK_INTERVAL_S}; DURATION {defaults.SOAK_DURATION_S}, RATE "
        f"{defaults.SOAK_RATE}, SCENARIO {defaults.SOAK_SCENARIO}",
        ("soak",),
        flag="interval",
        limits=(1, 600),
        unset=str(defaults.SOAK_INTERVAL_S),
    ),
    Variable(
        "SLO_P99_MS",
        "make capacity: the p99 objective in ms",
        str(defaults.SLO_P99_MS),
        ("capacity",),
        limits=(1, 600_000),
        unset=str(defaults.SLO_P99_MS),
    ),
    Variable(
        "SLO_P999_MS",
        "make capacity: a p99.9 objective in ms too",
        "none",
        ("capacity",),
        limits=(1, 600_000),
    ),
    Variable(
        "CAPACITY_BUDGET",
        "make capacity: seconds per server, scenario and trial (RATE's first value starts the "
        f"search: default {defaults.CAPACITY_START_RPS}; DURATION {defaults.CAPACITY_DURATION_S}"
        f", WARMUP {defaults.CAPACITY_WARMUP_S})",
        str(defaults.CAPACITY_BUDGET_S),
        ("capacity",),
        flag="budget",
        limits=(10, 86_400),
        unset=str(defaults.CAPACITY_BUDGET_S),
    ),
    Variable(
        "NAME",
        "make study: a study below, a comma list, or all",
        "none",
        ("study",),
        parser=parse_names("NAME", study_names),
        required_by=("study",),
    ),
    Variable(
        "ARMS",
        "make study: only these arms (comma list of the named studies' arm ids); the section "
        "shows each arm's latest run",
        "all",
        ("study",),
        parser=parse_text("ARMS"),
    ),
    Variable(
        "FORMAT",
        "make export: csv or json, one row per point on stdout",
        "none",
        ("export",),
        parser=parse_one_of("FORMAT", lambda: FORMATS),
        required_by=("export",),
    ),
    Variable(
        "BASE",
        "make compare: the results directory compared against",
        "none",
        ("compare",),
        parser=parse_result_set("BASE"),
        required_by=("compare",),
    ),
    Variable(
        "HEAD",
        "make compare: the results directory compared (HEAD/BASE ratios)",
        "none",
        ("compare",),
        parser=parse_result_set("HEAD"),
        required_by=("compare",),
    ),
    Variable(
        "FAIL_BELOW",
        "make compare: exit 1 when a point's req/s HEAD/BASE interval lies wholly below this "
        f"ratio ({_bounds(FAIL_BELOW_RANGE)}, e.g. 0.97)",
        "none",
        ("compare",),
        parser=parse_ratio("FAIL_BELOW", FAIL_BELOW_RANGE, "req/s HEAD/BASE, e.g. 0.97"),
    ),
    Variable(
        "FAIL_ABOVE",
        "make compare: exit 1 when a point's p99 HEAD/BASE interval lies wholly above this "
        f"ratio ({_bounds(FAIL_ABOVE_RANGE)}, e.g. 1.10)",
        "none",
        ("compare",),
        parser=parse_ratio("FAIL_ABOVE", FAIL_ABOVE_RANGE, "p99 HEAD/BASE, e.g. 1.10"),
    ),
    Variable(
        "REFERENCE",
        "1: merge the shipped reference (results/reference/) into your summary",
        "0",
        (),
        parser=parse_one_of("REFERENCE", lambda: ("0", "1")),
    ),
    Variable(
        "PRICE",
        "dollars per hour per arch or MACHINE label (amd64:0.0416,arm64:0.0336): req/s per "
        "dollar-hour in Machines compared",
        "none",
        (),
        parser=parse_price,
    ),
    Variable(
        "HOST",
        "make remote: [user@]host ssh reaches without a prompt (BatchMode), where make bench runs",
        "none",
        ("remote",),
        parser=parse_host,
        required_by=("remote",),
    ),
    Variable(
        "MACHINE",
        "a label for this machine in records and summaries",
        "hostname + identity",
        (),
        parser=parse_machine,
    ),
    Variable(
        "ROUNDS",
        "make overhead: rounds of bare wrk vs the harness per server and route; make noise: "
        f"rounds of server starts (default {defaults.NOISE_ROUNDS})",
        str(defaults.OVERHEAD_ROUNDS),
        ("overhead", NOISE),
        limits=(1, 100),
    ),
    Variable(
        "STARTS",
        "make noise: server starts per round (2 or more: the A/A race's A and A′)",
        str(defaults.NOISE_STARTS),
        (NOISE,),
        limits=(1, 20),
        unset=str(defaults.NOISE_STARTS),
    ),
    Variable(
        "RUNS",
        "make noise: measured runs per server start",
        str(defaults.NOISE_RUNS),
        (NOISE,),
        limits=(1, 50),
        unset=str(defaults.NOISE_RUNS),
    ),
    Variable(
        "LEGACY",
        "make overhead: 1 adds the observer as it was before it was made cheap",
        "0",
        ("overhead",),
        parser=parse_switch("LEGACY"),
    ),
    Variable(
        "MARGIN",
        "TRIALS=auto and make tune: the equivalence margin in percent: two points (or two "
        "capacities) closer than it are the same",
        str(defaults.AUTO_MARGIN_PCT),
        ("run", "capacity", TUNE, "study"),
        limits=MARGIN_RANGE,
        unset=str(defaults.AUTO_MARGIN_PCT),
        parser=parse_margin,
    ),
    Variable(
        "WAIT",
        "1: a second harness waits for the machine-wide lock; 0: it refuses at once",
        "1",
        (*SERVE, "study", "overhead", NOISE, TUNE),
        unset="1",
        parser=parse_switch("WAIT"),
    ),
    Variable(
        "CONFIRM",
        "1: run a plan longer than 24 hours (refused without it)",
        "0",
        (*RUN, "study", NOISE, TUNE),
        unset="0",
        parser=parse_confirm,
    ),
    Variable(
        "DRY_RUN",
        "make reference: 1 prints the plan (each question, its command, skipped or to run and "
        "why, the estimated minutes) and runs nothing",
        "0",
        (REFERENCE,),
        unset="0",
        parser=parse_switch("DRY_RUN"),
    ),
    Variable(
        "MINUTES",
        "make reference: the minutes this session gives the campaign; a question is asked only "
        "when its minutes fit in what is left (its estimate, or what it took when last "
        "answered where that was longer), the others wait for the next make reference",
        "unset: every question not answered yet",
        (REFERENCE,),
        limits=(1, 1_440),
    ),
    Variable(
        "KNOBS",
        "make tune: the search space, e.g. workers=1,2,4 threads=1,2,4,8 (values: whole "
        "numbers, cpus or <k>*cpus); knobs not named stay as declared",
        "each server.toml's tune lists",
        (TUNE,),
        parser=parse_knobs,
    ),
    Variable(
        "OBJECTIVE",
        "make tune: rps (closed-loop req/s, higher is better) or p99 (lower is better)",
        defaults.TUNE_OBJECTIVE,
        (TUNE,),
        unset=defaults.TUNE_OBJECTIVE,
        parser=parse_one_of("OBJECTIVE", lambda: OBJECTIVES),
    ),
    Variable(
        "TUNED",
        "1: make bench measures the configuration make tune found for this machine, scenario "
        "and concurrency, where one exists; 0: the declared one",
        "1",
        ("run",),
        unset="1",
        parser=parse_switch("TUNED"),
    ),
    Variable(
        "NGINX_PORT",
        "make compose-up/compose-bench: nginx's port on 127.0.0.1",
        "8080",
        (),
        limits=(1, 65_535),
    ),
    Variable(
        "PYTEST_ARGS",
        "make test: arguments to pytest (split into words, never run by a shell)",
        "none",
        (),
        parser=parse_pytest_args,
    ),
)


BY_NAME: dict[str, Variable] = {v.name: v for v in VARIABLES}


def for_command(command: str) -> tuple[Variable, ...]:
    """The variables `python -m bench <command>` takes, in declaration order (make remote:
    make bench's, for the other machine, and its own)."""
    return tuple(
        v for v in VARIABLES if command in v.commands or (command == REMOTE and "run" in v.commands)
    )


# Each make target and the `python -m bench` command its recipe runs (the Makefile's CHECK;
# None: it runs none): what a variable on make's command line is checked against (issue 58:
# a variable a target does not take is refused, never dropped). compose-up builds images.
MAKE_TARGETS: dict[str, str | None] = {
    "bench": "run",
    "remote": REMOTE,
    "capacity": "capacity",
    "serve": "serve",
    "overhead": "overhead",
    "noise": NOISE,
    "tune": TUNE,
    "soak": "soak",
    "study": "study",
    "report": "report",
    "reference": REFERENCE,
    "compare": "compare",
    "export": "export",
    "images": "images",
    "compose-up": "images",
    "compose-bench": "run",
    "compose-down": None,
    "help": None,
    "setup": None,
    "test": None,
    "lint": None,
    "format": None,
    "lock": None,
}
# What a target's own recipe reads besides its command's variables: make test's pytest
# arguments; the compose file's (compose/compose.yaml: the server, its knobs, nginx's port
# and timeout), read by compose-up and by compose-bench through it.
_COMPOSE = ("SERVER", "WORKERS", "THREADS", "CONNECTIONS", "BACKLOG", "PROXY_TIMEOUT")
_COMPOSE += ("NGINX_PORT",)
TARGET_OWN: dict[str, tuple[str, ...]] = {
    "test": ("PYTEST_ARGS",),
    "compose-up": _COMPOSE,
    "compose-bench": (*_COMPOSE, "ARCH", "PYTHON"),
}
# Read by every target that writes or reads records (the Makefile exports them as
# PYWEBBENCH_MACHINE, _REFERENCE, _PRICE): taken everywhere, as they always were.
EVERYWHERE = ("MACHINE", "REFERENCE", "PRICE")


def target_takes(target: str) -> set[str]:
    """The variables make `target` takes: its command's, its recipe's own, EVERYWHERE's."""
    command = MAKE_TARGETS[target]
    names = {v.name for v in for_command(command)} if command else set()
    return names | set(TARGET_OWN.get(target, ())) | set(EVERYWHERE)


def not_taken(name: str, goals: Iterable[str]) -> str | None:
    """Why `name`, given on make's command line, is refused for make `goals` (none of them
    takes it: "HOST: not with make bench; it applies to make remote"), or None."""
    known = [g for g in goals if g in MAKE_TARGETS]  # make precheck: checks any variable
    if name not in BY_NAME or not known or any(name in target_takes(g) for g in known):
        return None
    takers = [t for t in MAKE_TARGETS if name in target_takes(t)]
    return (
        f"{name}: not with make {' '.join(known)}; it applies to make "
        f"{', '.join(takers) or 'no target'}"
    )


def help_lines(known: dict[str, str] | None = None) -> list[str]:
    """`make help`'s variables: name, what it does, the default (`known`: defaults found at
    run time, as LOAD's, the load tool that declares itself the default)."""
    known = known or {}
    return [
        f"  {v.name:<18} {v.about} (default: {known.get(v.name, v.default)})" for v in VARIABLES
    ]


def unknown_variable(name: str) -> str | None:
    """Why `name` (set on make's command line) is refused, or None when it is declared:
    "SERVERS is not a variable; did you mean SERVER?"."""
    if name in BY_NAME or name in MAKE_OWN:
        return None
    names = list(BY_NAME)
    close = difflib.get_close_matches(name.upper(), names, n=1, cutoff=0.6)
    hint = f"did you mean {close[0]}?" if close else f"valid: {', '.join(names)}"
    return f"{name} is not a variable; {hint}"


def command_defaults(command: str) -> dict[str, str]:
    """What a command sets where the user did not (make capacity and make soak send a fixed
    rate with the open-loop tool; make overhead measures two servers on two routes; make
    noise one server on /db at one concurrency, in short runs)."""
    if command == "capacity":
        return {
            "LOAD": open_loop_loads()[0],
            "DURATION": str(defaults.CAPACITY_DURATION_S),
            "WARMUP": str(defaults.CAPACITY_WARMUP_S),
            "TRIALS": str(defaults.CAPACITY_KNEE_TRIALS),
            "RATE": str(defaults.CAPACITY_START_RPS),
        }
    if command == "soak":
        return {
            "LOAD": open_loop_loads()[0],
            "DURATION": str(defaults.SOAK_DURATION_S),
            "WARMUP": str(defaults.SOAK_WARMUP_S),
            "TRIALS": "1",
            "RATE": str(defaults.SOAK_RATE),
            "SCENARIO": defaults.SOAK_SCENARIO,
        }
    if command == "overhead":
        return {
            "SERVER": defaults.OVERHEAD_SERVERS,
            "SCENARIO": defaults.OVERHEAD_SCENARIOS,
            "CONCURRENCY": str(defaults.OVERHEAD_CONCURRENCY),
            "DURATION": str(defaults.OVERHEAD_DURATION_S),
            "ROUNDS": str(defaults.OVERHEAD_ROUNDS),
            "LEGACY": "0",
        }
    if command == TUNE:  # its rounds are a race: TRIALS=auto's BUDGET and MARGIN apply
        return {
            "TRIALS": "auto",
            "SCENARIO": defaults.TUNE_SCENARIO,
            "CONCURRENCY": str(defaults.TUNE_CONCURRENCY),
        }
    if command == NOISE:
        return {
            "SCENARIO": defaults.NOISE_SCENARIO,
            "CONCURRENCY": str(defaults.NOISE_CONCURRENCY),
            "DURATION": str(defaults.NOISE_DURATION_S),
            "ROUNDS": str(defaults.NOISE_ROUNDS),
        }
    return {}


# -- rules between two variables ----------------------------------------------------------


@dataclass(frozen=True)
class Rule:
    """When the user sets `name` (to one of `when`; None: to anything), `other` must be one of
    `needs` (None: set at all), or, with `needs` empty, must not be set; the refusal names
    `name`, what the user set."""

    name: str
    other: str
    needs: tuple[str, ...] | Callable[[], tuple[str, ...]] | None
    why: str
    when: tuple[str, ...] | Callable[[], tuple[str, ...]] | None = None
    spared: tuple[str, ...] = ()  # commands the rule does not hold for

    def broken(self, given: Mapping[str, str], effective: Mapping[str, str]) -> str | None:
        """The one-line refusal when `given` (what the user set) breaks the rule."""
        raw = given.get(self.name, "").strip()
        when = self.when() if callable(self.when) else self.when
        if not raw or (when is not None and normal(self.name, raw) not in when):
            return None
        shown = self.name if when is None else f"{self.name}={raw}"
        other = effective.get(self.other, "").strip()
        needs = self.needs() if callable(self.needs) else self.needs
        if needs is None:
            return None if other else f"{shown} needs {self.other}=: {self.why}"
        if not needs:
            off = not other or normal(self.other, other) in ("none", "off", "native")
            return (
                None
                if off
                else f"{shown} and {self.other}= cannot go together: {self.why}; valid: one of them"
            )
        if normal(self.other, other) in needs:
            return None
        return f"{shown} needs {self.other}={' or '.join(needs)}: {self.why}"


def normal(name: str, raw: str) -> str:
    """A value as rules compare it: lower-case, a switch as on/off."""
    value = raw.strip().lower()
    variable = BY_NAME.get(name)
    if variable is not None and variable.name in SWITCH_NAMES and value in ("1", "0"):
        return "on" if value == "1" else "off"
    return value


SWITCH_NAMES = ("KEEPALIVE", "UPSTREAM_KEEPALIVE", "PIN", "REFERENCE", "LEGACY", "WAIT", "CONFIRM")
SWITCH_NAMES += ("DRY_RUN",)
SWITCH_NAMES += ("TUNED",)
_DOCKER = "the limit is the server container's"
_NOT_DOCKER = "RUNTIME=docker starts the server in its container here"
_TARGET = "TARGET drives a server running elsewhere"
_OPEN = "a fixed arrival rate is sent by an open-loop tool (wsload: messages/s, echo route)"
_PROTOCOL = "the protocol is spoken between the load tool and a server"
_BEYOND_HTTP1 = tuple(name for name in PROTOCOLS if name != HTTP1)
_HTTP2 = tuple(name for name, p in PROTOCOLS.items() if p.http2)
RULES: tuple[Rule, ...] = (
    Rule("CPUS", "RUNTIME", ("docker",), f"{_DOCKER} (a native server's is CPU_QUOTA=)"),
    Rule("MEMORY", "RUNTIME", ("docker",), _DOCKER),
    Rule("NETWORK", "RUNTIME", ("docker",), "it is the server container's", ("bridge",)),
    Rule("NETWORK", "PROXY", (), "the load talks to the container directly", ("bridge",)),
    Rule("UPSTREAM_KEEPALIVE", "PROXY", ("nginx", "alb"), "it is nginx's, to the server"),
    Rule("LIFECYCLE", "LOAD", open_loop_loads, "the event needs a rate that does not slow down"),
    Rule("LIFECYCLE", "RATE", None, "the event needs a fixed arrival rate (RATE=<req/s>)"),
    Rule("RATE", "LOAD", rate_loads, _OPEN),
    Rule(
        "LOAD",
        "RATE",
        None,
        "it sends a fixed arrival rate: a comma list of requests/s, e.g. RATE=500,1000",
        open_loop_loads,
    ),
    Rule(
        "LOCUST_WORKERS",
        "LOAD",
        lambda: tuple(
            n
            for n, t in load_tools().items()
            if "LOCUST_WORKERS" in t.get("variables", ())  # type: ignore[operator]
        ),
        "the workers are Locust's",
    ),
    # make study without TRIALS=auto: BUDGET bounds each tuned arm's search (bench.studies)
    Rule("BUDGET", "TRIALS", ("auto",), "it bounds TRIALS=auto's rounds", spared=("study",)),
    Rule("MARGIN", "TRIALS", ("auto",), "it is TRIALS=auto's equivalence margin"),
    Rule(
        "UPSTREAM_KEEPALIVE",
        "PROXY",
        ("nginx",),
        "an ALB always keeps target connections alive (PROXY=alb without it)",
        ("off",),
    ),
    Rule("APP", "LOAD", lambda: url_loads(), "your app's routes are requested one URL at a time"),
    Rule("APP_ROUTES", "APP", None, "the routes are your app's (APP=<path or module>:<callable>)"),
    Rule("APP_REQUIREMENTS", "APP", None, "the requirements are your app's"),
    Rule("APP_KIND", "APP", None, "the kinds are your app's entries'"),
    Rule("APP", "TARGET", (), "APP starts your app here; " + _TARGET),
    Rule("PROXY", "TARGET", (), _TARGET + ": put nginx in front there", ("nginx", "alb")),
    Rule("CPU_QUOTA", "TARGET", (), "it limits a server started here"),
    Rule("RECYCLE", "TARGET", (), "it sets flags of a server started here"),
    Rule("LIFECYCLE", "TARGET", (), "it signals a server started here"),
    Rule("RUNTIME", "TARGET", (), _NOT_DOCKER, ("docker",)),
    Rule("RUNTIME", "CPU_QUOTA", (), _NOT_DOCKER + " (its CPU limit is CPUS=)", ("docker",)),
    Rule(
        "RUNTIME",
        "LIFECYCLE",
        (),
        "not supported in a container; valid: RUNTIME=native",
        ("docker",),
    ),
    Rule(
        "RUNTIME", "RECYCLE", (), "not supported in a container; valid: RUNTIME=native", ("docker",)
    ),
    *(
        Rule(
            "PROTOCOL",
            "LOAD",
            functools.partial(protocol_loads, name),
            "only those tools speak it",
            (name,),
            spared=("serve",),  # make serve starts no load: the user's tools speak it
        )
        for name in PROTOCOLS
        if name != HTTP1
    ),
    Rule("PROTOCOL", "PROXY", (), _PROTOCOL + "; nginx would speak HTTP/1.1 to it", _BEYOND_HTTP1),
    Rule(
        "PROTOCOL",
        "TARGET",
        (),
        _PROTOCOL + " started here, with flags and a certificate made here",
        _BEYOND_HTTP1,
    ),
    Rule(
        "PROTOCOL",
        "RUNTIME",
        (),
        _PROTOCOL + " started natively here; valid: RUNTIME=native",
        _BEYOND_HTTP1,
    ),
    Rule("STREAMS", "PROTOCOL", _HTTP2, "streams are HTTP/2's"),
    Rule("PYTHON", "TARGET", (), "the interpreter is that of a server started here"),
    Rule("PYTHON", "APP", (), "your app's requirements resolve on the usual python3 only"),
    Rule(
        "KEEPALIVE",
        "PROTOCOL",
        tuple(name for name in PROTOCOLS if name not in _HTTP2),
        "HTTP/2 has no request per connection (oha: --disable-keepalive is not for HTTP/2)",
        ("off",),
    ),
    Rule("RUNTIME", "APP", (), "your app runs natively only; valid: RUNTIME=native", ("docker",)),
    Rule("APP_FLAVOR", "APP", (), "your app is what it is; APP_FLAVOR picks app_common's"),
    Rule("APP_FLAVOR", "TARGET", (), _TARGET + ", serving whatever app it serves", (RAW,)),
    Rule(
        "APP_FLAVOR",
        "RUNTIME",
        (),
        "the servers' images hold the framework app only; valid: RUNTIME=native",
        (RAW,),
    ),
    Rule(
        "RUNTIME", "PIN", (), "pinning is not supported in a container; valid: PIN=0", ("docker",)
    ),
)


def effective(command: str, given: Mapping[str, str]) -> dict[str, str]:
    """What each variable of `command` is: the user's value, else the command's default, else
    the declared one (as the harness will take it)."""
    values = {v.name: v.unset for v in for_command(command) if v.unset is not None}
    takes_load = "LOAD" in values or any(v.name == "LOAD" for v in for_command(command))
    values |= command_defaults(command)
    values |= {k: v for k, v in given.items() if v.strip()}
    if takes_load and not given.get("LOAD", "").strip():
        # declared by the tools themselves (bench/load): the one that drives the scenarios
        named = [s.strip() for s in str(values.get("SCENARIO", "")).split(",")]
        values["LOAD"] = values.get("LOAD") or default_load(named)
    return values  # type: ignore[return-value]


def plan_seconds(command: str, values: Mapping[str, object]) -> int:
    """Load time of a fixed plan at most (as bench.core.plan.estimate_seconds counts it):
    servers x trials x scenarios x (primer + points x (warmup + duration))."""
    servers = _count(values.get("SERVER"), 1)
    scenarios = _count(values.get("SCENARIO"), len(defaults.SCENARIOS))
    rates = values.get("RATE") or ()
    conc = values.get("CONCURRENCY") or (() if rates else defaults.CONCURRENCY)
    points = max(1, len(rates)) * max(1, len(conc))  # type: ignore[arg-type]
    per_point = int(values.get("WARMUP", 0)) + int(values.get("DURATION", 0))  # type: ignore[call-overload]
    per_trial = servers * scenarios * (defaults.PRIMER_S + points * per_point)
    if values.get("TRIALS", 1) is None:  # auto: the first rounds always, then the budget
        budget = int(values.get("BUDGET") or defaults.AUTO_BUDGET_MIN) * 60  # type: ignore[call-overload]
        return max(budget, defaults.AUTO_MIN_TRIALS * per_trial)
    return int(values.get("TRIALS", 1)) * per_trial  # type: ignore[call-overload]


def _auto_seconds(values: Mapping[str, object], per_trial: int) -> int | None:
    """TRIALS=auto's load time (the first rounds always, then BUDGET), or None for a fixed
    number of trials."""
    if "TRIALS" not in values or values["TRIALS"] is not None:
        return None
    budget = int(values.get("BUDGET") or defaults.AUTO_BUDGET_MIN) * 60  # type: ignore[call-overload]
    return max(budget, defaults.AUTO_MIN_TRIALS * per_trial)


def capacity_seconds(values: Mapping[str, object]) -> int:
    """make capacity's search at most: servers x scenarios x trials x CAPACITY_BUDGET."""
    servers = _count(values.get("SERVER"), 1)
    scenarios = _count(values.get("SCENARIO"), len(defaults.SCENARIOS))
    budget = int(values.get("CAPACITY_BUDGET") or defaults.CAPACITY_BUDGET_S)  # type: ignore[call-overload]
    per_trial = servers * scenarios * budget
    auto = _auto_seconds(values, per_trial)
    return auto if auto is not None else int(values.get("TRIALS") or 1) * per_trial  # type: ignore[call-overload]


def noise_seconds(values: Mapping[str, object]) -> int:
    """make noise's runs: ROUNDS x STARTS x RUNS x (WARMUP + DURATION)."""
    runs = 1
    for name, unset in (("ROUNDS", defaults.NOISE_ROUNDS), ("STARTS", defaults.NOISE_STARTS)):
        runs *= int(values.get(name) or unset)  # type: ignore[call-overload]
    runs *= int(values.get("RUNS") or defaults.NOISE_RUNS)  # type: ignore[call-overload]
    window = int(values.get("WARMUP") or 0) + int(values.get("DURATION") or 0)  # type: ignore[call-overload]
    return runs * window


def _study_round_seconds(data: dict, duration: object) -> int:
    """One round of a study file's arms: per arm, scenarios x points x (warmup + duration)."""
    total = 0
    for arm in [a for a in data.get("arm", []) if isinstance(a, dict)]:
        settings = {**data.get("run", {}), **arm}
        scenarios = settings.get("scenarios") or [settings.get("scenario")]
        points = settings.get("rates") or settings.get("concurrency") or [0]
        points = points if isinstance(points, list) else [points]
        length = duration or settings.get("duration") or defaults.DURATION_S
        window = int(settings.get("warmup", defaults.STUDY_WARMUP_S)) + int(length)  # type: ignore[call-overload]
        total += len(scenarios) * len(points) * window
    return total


def study_seconds(values: Mapping[str, object]) -> int:
    """make study's load time at most, from the study files: rounds of its arms (TRIALS;
    auto: BUDGET or the first rounds), plus each tuned arm's [tune] budget
    (bench.studies.cost counts the same, with what set-up installs)."""
    total = 0
    for name in values.get("NAME") or ():  # type: ignore[union-attr]
        # read, not checked: the study's schema and its servers are refused with their own
        # lines later (bench.precheck.check_studies, the harness); a broken file counts 0 here
        try:
            data = tomllib.loads(studyfile.study_path(name).read_text())
            per_round = _study_round_seconds(data, values.get("DURATION"))
            tuned = sum(1 for a in data.get("arm", []) if isinstance(a, dict) and a.get("tune"))
            searches = tuned * int(data.get("tune", {}).get("budget", 0)) * 60
        except (OSError, tomllib.TOMLDecodeError, TypeError, ValueError, AttributeError):
            continue
        auto = _auto_seconds(values, per_round)
        rounds = int(values.get("TRIALS") or defaults.STUDY_TRIALS)  # type: ignore[call-overload]
        total += (auto if auto is not None else rounds * per_round) + searches
    return total


def measuring_seconds(command: str, values: Mapping[str, object]) -> int:
    """The load time of a measuring command's plan at most (CONFIRM_ABOVE_S holds for it)."""
    if command == "capacity":
        return capacity_seconds(values)
    if command == NOISE:
        return noise_seconds(values)
    if command == TUNE:  # BUDGET minutes per server's search
        budget = int(values.get("BUDGET") or defaults.AUTO_BUDGET_MIN) * 60  # type: ignore[call-overload]
        return budget * _count(values.get("SERVER"), 1)
    if command == "study":
        return study_seconds(values)
    return plan_seconds(command, values)


def _count(value: object, unset: int) -> int:
    """How many names a parsed list holds (a text value not parsed here: its comma items)."""
    if isinstance(value, str):
        return len([x for x in value.split(",") if x.strip()])
    return len(value) if isinstance(value, tuple | list) else unset


def duration_text(seconds: float) -> str:
    """A length of time as people read it: 45 s, 12 min, 3.5 h, 2.1 days (never 30240770m)."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * 86_400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86_400:,.1f} days"


def _soak_rules(given: Mapping[str, str], values: Mapping[str, object]) -> None:
    """make soak: one rate, here (not TARGET=), DURATION long enough for a memory slope."""
    if len(values["RATE"]) != 1:  # type: ignore[arg-type]
        raise UsageError("make soak runs at one fixed rate: RATE=<req/s> (one number)")
    if given.get("TARGET"):
        raise UsageError("make soak samples the server's memory here: not with TARGET=")
    interval = int(values.get("SOAK_INTERVAL", defaults.SOAK_INTERVAL_S))  # type: ignore[call-overload]
    if int(values["DURATION"]) < 3 * interval:  # type: ignore[call-overload]
        raise UsageError(
            f"DURATION={values['DURATION']} holds fewer than 3 samples of SOAK_INTERVAL="
            f"{interval}: a memory slope needs 3; raise DURATION or lower SOAK_INTERVAL"
        )


def _paced_rules(command: str, values: Mapping[str, object]) -> None:
    """A paced tool's RATE= (make capacity's steps) replaces the echo route's schedule: the
    push route's rate is the server's, the idle scenario sends nothing."""
    load = values.get("LOAD")
    if load in open_loop_loads() or load not in rate_loads():
        return
    if command != "capacity" and not values.get("RATE"):
        return
    paced = [s for s in values.get("SCENARIO") or () if s != "websocket"]  # type: ignore[attr-defined]
    if paced:
        raise UsageError(
            f"RATE= paces LOAD={load}'s messages on the echo route: SCENARIO="
            f"{','.join(paced)} cannot take it (push: the server's rate, MESSAGE_RATE=; idle: "
            "no message); valid: SCENARIO=websocket"
        )


def _capacity_rules(given: Mapping[str, str], values: Mapping[str, object]) -> None:
    """make capacity: an open-loop or paced tool, a steady server (no LIFECYCLE or RECYCLE)."""
    if values["LOAD"] not in rate_loads():
        raise UsageError(
            f"make capacity needs a fixed arrival rate; LOAD={values['LOAD']} is "
            f"closed-loop; valid: LOAD={' or '.join(rate_loads())}"
        )
    if values["LOAD"] not in open_loop_loads() and len(values.get("CONCURRENCY") or ()) != 1:  # type: ignore[arg-type]
        raise UsageError(
            f"make capacity LOAD={values['LOAD']} spreads each step's messages/s over one "
            "number of connections; valid: CONCURRENCY=<connections> (one number)"
        )
    for name in ("LIFECYCLE", "RECYCLE"):
        if given.get(name):
            raise UsageError(
                f"{name}: make capacity searches a steady server's rate; LIFECYCLE and "
                "RECYCLE apply to make bench, make soak and studies"
            )


# The scenarios MESSAGE_BYTES and MESSAGE_RATE go to: the WebSocket ones (websocket-idle's
# path carries both, its rate held at 0 by the route); HTTP scenarios have no messages.
MESSAGE_SCENARIOS = tuple(n for n, s in scenario.SCENARIOS.items() if s.needs == scenario.WS)


def _message_rules(given: Mapping[str, str], values: Mapping[str, object]) -> None:
    """MESSAGE_BYTES and MESSAGE_RATE where a scenario that sends messages runs (never
    dropped without a word where none does)."""
    chosen = values.get("SCENARIO", defaults.SCENARIOS)  # unset: the harness's defaults
    names = chosen if isinstance(chosen, tuple) else ()  # APP's routes: none sends messages
    if set(names) & set(MESSAGE_SCENARIOS):
        return
    for name in ("MESSAGE_BYTES", "MESSAGE_RATE"):
        if given.get(name, "").strip():
            raise UsageError(
                f"{name}: no WebSocket scenario in SCENARIO="
                f"{','.join(names) or given.get('SCENARIO')}; it applies to SCENARIO="
                f"{' or '.join(MESSAGE_SCENARIOS)}"
            )


def command_rules(command: str, given: Mapping[str, str], values: Mapping[str, object]) -> None:
    """What `command` asks of its variables together (`values`: parsed effective values);
    UsageError on the first it does not get."""
    for variable in VARIABLES:
        if command in variable.required_by and not given.get(variable.name, "").strip():
            raise UsageError(
                f"{variable.name} is required by make {_target(command)}; {_valid(variable)}"
            )
    if values.get("APP_FLAVOR") == RAW:
        flavor_rules(values)
    if command == "soak":
        _soak_rules(given, values)
    if command == "capacity":
        _capacity_rules(given, values)
    if command in ("run", "capacity"):
        _paced_rules(command, values)
    if command == "run":
        _message_rules(given, values)
    if command in ("soak", "serve") and values.get("TRIALS", 1) is None:
        raise UsageError(
            f"TRIALS=auto applies to make bench; valid here: TRIALS=<1..{defaults.AUTO_MAX_TRIALS}>"
        )
    if (
        command == "capacity"
        and values.get("TRIALS", 1) is None
        and _count(values["SERVER"], 1) < 2
    ):
        raise UsageError(
            "make capacity TRIALS=auto races two or more servers' capacities; valid: "
            f"SERVER=<a,b,...> or all, or TRIALS=<1..{defaults.AUTO_MAX_TRIALS}>"
        )
    if command == "serve":
        if len(values["SERVER"]) != 1:  # type: ignore[arg-type]
            raise UsageError(
                f"make serve starts one server; valid SERVER: {', '.join(server_ids())}"
            )
        if given.get("TARGET"):
            raise UsageError("make serve starts the server here; TARGET applies to make bench only")
    if command == "overhead" and len(values["CONCURRENCY"]) != 1:  # type: ignore[arg-type]
        raise UsageError("make overhead measures one CONCURRENCY; give one number")
    if command == NOISE:
        noise_rules(given, values)
    if command == TUNE:
        tune_rules(given, values)
    if command == REFERENCE:
        reference_rules(given)
    if command == "compare" and given.get("BASE") and given.get("BASE") == given.get("HEAD"):
        raise UsageError("BASE and HEAD are the same directory: compare two result sets")
    if command in CONFIRMED and not values.get("CONFIRM"):
        seconds = measuring_seconds(command, values)
        if seconds > CONFIRM_ABOVE_S:
            raise UsageError(
                f"this plan is about {duration_text(seconds)} of load (more than 24 h): add "
                f"CONFIRM=1 to run it, or fewer {PLAN_SIZE.get(command, 'SERVER/TRIALS/DURATION')}"
            )


def flavor_rules(values: Mapping[str, object]) -> None:
    """APP_FLAVOR=raw: Python servers only (a static one serves no app), and the scenarios
    the raw app serves only (another would be verified against, or measured on, nothing)."""
    scenarios = values.get("SCENARIO")
    if isinstance(scenarios, tuple | list):
        other = [s for s in scenarios if s not in RAW_SCENARIOS]
        if other:
            raise UsageError(
                f"SCENARIO={','.join(other)}: not served by the raw app (APP_FLAVOR=raw serves "
                f"{', '.join(RAW_SCENARIOS)}); valid: SCENARIO={','.join(RAW_SCENARIOS)}"
            )
    servers = values.get("SERVER")
    if isinstance(servers, tuple | list):
        specs = load_all()
        static = [s for s in servers if s in specs and specs[s].app == "static"]
        if static:
            python = [s for s in server_ids() if specs[s].app != "static"]
            raise UsageError(
                f"SERVER={','.join(static)} is not a Python server: it serves no app of either "
                f"flavour (APP_FLAVOR=raw); valid: SERVER={','.join(python)}"
            )


# What make noise does not take, and why: it starts one server again and again and measures
# its closed-loop req/s in a nested design of its own (bench/harness/nested.py). These are
# make bench's variables, not make noise's: read from `given` (the pre-check passes every
# declared variable the environment holds), so that they are refused, not silently ignored.
NOISE_REFUSES = (
    ("RATE", "it measures closed-loop req/s; RATE applies to make bench"),
    ("TARGET", "it starts the server here, again and again"),
    ("LIFECYCLE", "it measures a steady server; LIFECYCLE applies to make bench"),
    ("RECYCLE", "it measures a steady server; RECYCLE applies to make bench"),
    ("APP", "it measures a declared scenario; APP applies to make bench"),
    ("TRIALS", "its runs are ROUNDS x STARTS x RUNS; TRIALS applies to make bench"),
)


def noise_rules(given: Mapping[str, str], values: Mapping[str, object]) -> None:
    """make noise: none of NOISE_REFUSES; one SERVER, SCENARIO and CONCURRENCY."""
    for name, why in NOISE_REFUSES:
        if given.get(name, "").strip():
            raise UsageError(f"{name}: not with make noise: {why}")
    for name in ("SERVER", "SCENARIO", "CONCURRENCY"):
        chosen = values[name]
        if len(chosen) != 1:  # type: ignore[arg-type]
            raise UsageError(
                f"make noise measures one {name}; valid: one of {', '.join(map(str, chosen))}"  # type: ignore[call-overload]
            )


# What make tune does not take, and why (read from `given`, as NOISE_REFUSES).
TUNE_REFUSES = (
    ("TRIALS", "its rounds are a race within BUDGET (minutes per server)"),
    ("WORKERS", "it searches the knobs: KNOBS=workers=1,2,4 names the values to try"),
    ("THREADS", "it searches the knobs: KNOBS=threads=1,2,4 names the values to try"),
    ("CONNECTIONS", "it searches the knobs: KNOBS=connections=100,1000 names the values to try"),
    ("BACKLOG", "it searches the knobs: KNOBS=backlog=128,2048 names the values to try"),
    ("RATE", "it measures closed-loop load; RATE applies to make bench"),
    ("LOAD", "it measures with the default closed-loop tool"),
    ("TARGET", "it starts each configuration here"),
    ("PROXY", "it measures the server directly"),
    ("CPU_QUOTA", "it measures a server started here without a quota (RUNTIME=docker CPUS=)"),
    ("LIFECYCLE", "it measures a steady server; LIFECYCLE applies to make bench"),
    ("RECYCLE", "it measures a steady server; RECYCLE applies to make bench"),
    ("APP", "it tunes a declared server on the built-in app"),
)


def tune_rules(given: Mapping[str, str], values: Mapping[str, object]) -> None:
    """make tune: none of TUNE_REFUSES; one SCENARIO and CONCURRENCY (a tuned configuration
    holds for one point); OBJECTIVE not capacity; KNOBS naming each server's knobs; a search
    space for each server."""
    for name, why in TUNE_REFUSES:
        if given.get(name, "").strip():
            raise UsageError(f"{name}: not with make tune: {why}")
    if values.get("APP_FLAVOR") == RAW:
        # an answer file is one per machine, server and point: a raw app's would replace the
        # framework app's, which make bench then starts the framework app with
        raise UsageError(
            "APP_FLAVOR=raw: not with make tune yet (its answer file would replace the framework "
            "app's for the same server and point); valid: APP_FLAVOR=framework"
        )
    for name in ("SCENARIO", "CONCURRENCY"):
        chosen = values[name]
        if len(chosen) != 1:  # type: ignore[arg-type]
            raise UsageError(
                f"make tune tunes at one {name}; valid: one of {', '.join(map(str, chosen))}"  # type: ignore[call-overload]
            )
    if values.get("OBJECTIVE") == "capacity":
        raise UsageError(
            "OBJECTIVE=capacity: not supported by make tune yet (a capacity search per "
            "configuration and round does not fit a race's rounds); valid: rps, p99"
        )
    specs = load_all()
    knobs = values.get("KNOBS") or {}
    for server in values["SERVER"]:  # type: ignore[attr-defined]
        declared = specs[server].knobs
        unknown = [k for k in knobs if k not in declared]  # type: ignore[union-attr]
        if unknown:
            raise UsageError(
                f"KNOBS: {server} has no knob {unknown[0]}; valid: {', '.join(declared) or 'none'}"
            )
        if not knobs and not any(k.tune for k in declared.values()):
            raise UsageError(
                f"SERVER={server} declares no search space (tune = [...] in its server.toml); "
                "give KNOBS=, e.g. KNOBS='workers=1,2,4'"
            )


def reference_rules(given: Mapping[str, str]) -> None:
    """make reference: its questions' variables are declared in reference.toml, so it takes
    none of make bench's (a SERVER= here would be silently ignored)."""
    own = {v.name for v in for_command(REFERENCE)} | {"MACHINE"}
    for name, raw in given.items():
        if raw.strip() and name not in own:
            raise UsageError(
                f"{name}: not with make reference: each question's variables are declared in "
                f"reference.toml; valid: {', '.join(sorted(own))}"
            )


def _target(command: str) -> str:
    return {"run": "bench"}.get(command, command)


def _valid(variable: Variable) -> str:
    """How to name a valid value of a required variable."""
    if variable.name == "NAME":
        return f"valid: {', '.join(study_names())}, all"
    if variable.name == "FORMAT":
        return f"valid: {', '.join(FORMATS)}"
    return f"give {variable.name}=<{variable.about.split(':')[-1].strip()}>"


REMOTE_OWN = ("HOST",)  # make remote's own variables: never passed to the other machine


def check(command: str, given: Mapping[str, str]) -> dict[str, object]:
    """Every variable `command` takes, parsed by its declaration, then the rules between them
    and the command's own: the parsed effective values, or UsageError on the first problem."""
    taken = {v.name for v in for_command(command)} | {"MACHINE", "REFERENCE", "PRICE"}
    values: dict[str, object] = {}
    if command == REMOTE:
        values |= check("run", {k: v for k, v in given.items() if k not in REMOTE_OWN})
    eff = effective(command, given)
    for name, raw in eff.items():
        variable = BY_NAME.get(name)
        if variable is None or name not in taken:
            continue
        if variable.unless and eff.get(variable.unless):
            values[name] = raw  # the other variable's check decides (APP: its routes)
            continue
        values[name] = variable.parse(raw)
    for name, raw in given.items():  # set but empty: never silently the default
        if name in taken and not raw.strip():
            BY_NAME[name].parse(raw)
    for rule in RULES:
        if rule.name in taken and command not in rule.spared:
            problem = rule.broken({k: v for k, v in given.items() if k in taken}, eff)
            if problem is not None:
                raise UsageError(problem)
    command_rules(command, given, values)
    return values
