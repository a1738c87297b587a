"""Make variables as declarative data: the one list of what a user may set.

Input: bench/core/defaults.py. Output: VARIABLES, one Variable per make variable: its CLI flag,
the commands that take it, its bounds, the Options field it sets when it needs no rule of its
own, and the line `make help` prints. From it come the parser's arguments and bounds
(bench/cli.py), the options the Makefile passes (`python -m bench variables <command>`) and
`make help` (`python -m bench help`). Adding a make variable is one entry here and, when the
harness reads it, one field of bench/core/plan.Options (docs/development.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from bench.core import defaults

# The commands a run variable goes to: make bench (and compose-bench), capacity, soak.
RUN = ("run", "capacity", "soak")
# ... and make serve, which starts a server and no load.
SERVE = (*RUN, "serve")
# make noise (python -m bench noise) takes these of make bench's, with defaults of its own.
NOISE = "noise"
KINDS = ("int", "switch")


@dataclass(frozen=True)
class Variable:
    """One make variable."""

    name: str  # SERVER
    about: str  # what it does, one line for make help
    default: str  # as make help states it
    commands: tuple[str, ...] = RUN  # the `python -m bench` commands the Makefile passes it to
    flag: str | None = None  # the CLI option without "--"; None: the name, lower-case, "-"
    unset: str | None = None  # the CLI option's value when the variable is not set
    limits: tuple[int, int] | None = None  # a whole number's bounds (bench.cli.validate_int)
    # The plan.Options field it sets when it needs no rule of its own: validated by `kind`
    # alone (bench.cli.simple_options). None: a rule in bench/cli.py, or not a run option.
    field: str | None = None
    kind: str | None = None  # one of KINDS, with `field`
    # Why it cannot apply to a server running elsewhere (TARGET=): refused with it.
    local: str | None = None

    @property
    def option(self) -> str:
        """The CLI option: `--load-threads`."""
        return "--" + (self.flag or self.name.lower().replace("_", "-"))

    @property
    def dest(self) -> str:
        """The argparse attribute the option lands in: `load_threads`."""
        return self.option[2:].replace("-", "_")


def _ints(values: tuple[int, ...]) -> str:
    return ",".join(map(str, values))


VARIABLES: tuple[Variable, ...] = (
    Variable(
        "SERVER",
        "server id, comma list, or all",
        defaults.SERVER,
        (*SERVE, "overhead", "images", NOISE),
        unset=defaults.SERVER,
    ),
    Variable(
        "SCENARIO",
        "comma list of the scenarios below",
        ",".join(defaults.SCENARIOS),
        (*RUN, "overhead", NOISE),
    ),
    Variable(
        "CONCURRENCY",
        "comma list of open connections; with LOAD=oha the pool the rate is sent from",
        f"{_ints(defaults.CONCURRENCY)}; with LOAD=oha: per rate",
        limits=(1, 10_000),
        commands=(*RUN, "overhead", NOISE),
    ),
    Variable(
        "DURATION",
        "seconds per measured run",
        str(defaults.DURATION_S),
        (*RUN, "study", "overhead", NOISE),
        limits=(1, 86_400),  # make soak runs for hours
        field="duration_s",
        kind="int",
        unset=str(defaults.DURATION_S),
    ),
    Variable(
        "WARMUP",
        "seconds of warmup before each measurement",
        str(defaults.WARMUP_S),
        (*RUN, NOISE),
        limits=(0, 600),
        field="warmup_s",
        kind="int",
        unset=str(defaults.WARMUP_S),
    ),
    Variable(
        "TRIALS",
        "measured trials per server/scenario/concurrency, or auto: rounds until every "
        f"point's 95 % interval of req/s is within ±{defaults.AUTO_TARGET:.0%} (BUDGET); "
        f"make capacity: rounds of steps around the knee, each on a fresh server start "
        f"(default {defaults.CAPACITY_KNEE_TRIALS})",
        str(defaults.TRIALS),
        limits=(1, defaults.AUTO_MAX_TRIALS),
        unset=str(defaults.TRIALS),
    ),
    Variable(
        "BUDGET",
        f"TRIALS=auto: minutes of rounds at most (at least {defaults.AUTO_MIN_TRIALS} trials "
        "run whatever it says)",
        str(defaults.AUTO_BUDGET_MIN),
        ("run",),
        flag="trials-budget",
        limits=(1, 1_440),
    ),
    Variable("ARCH", "amd64 or arm64", "this host's", (*SERVE, "images")),
    Variable(
        "RESULTS",
        "directory for records and summary.md",
        defaults.RESULTS,
        (*RUN, "study", "report", "export", NOISE),
        unset=defaults.RESULTS,
    ),
    Variable(
        "WORKERS", "a server's workers, where it has them", "server.toml", SERVE, limits=(1, 256)
    ),
    Variable(
        "THREADS", "threads per worker, where it has them", "server.toml", SERVE, limits=(1, 1_024)
    ),
    Variable(
        "CONNECTIONS",
        "connections per worker, where it has them",
        "server.toml",
        SERVE,
        limits=(1, 100_000),
    ),
    Variable(
        "BACKLOG", "the listen backlog, where it has one", "server.toml", SERVE, limits=(1, 65_535)
    ),
    Variable(
        "LOAD_THREADS",
        "wrk threads",
        "half the CPUs, at least 1",
        (*RUN, "overhead"),
        limits=(1, 64),
    ),
    Variable(
        "SEED",
        "seed for the random server order",
        "random",
        (*RUN, "study", NOISE),
        limits=(0, 2**31),
    ),
    Variable(
        "PROXY",
        "none, nginx (nginx from proxy/ in front of the server) or alb (nginx as a cloud "
        "balancer: 60 s upstream idle timeout, no retry)",
        defaults.PROXY,
        SERVE,
        unset=defaults.PROXY,
    ),
    Variable(
        "KEEPALIVE",
        "on or off: client keep-alive, and nginx's upstream keep-alive",
        "on" if defaults.KEEPALIVE else "off",
        SERVE,
        unset="on" if defaults.KEEPALIVE else "off",
    ),
    Variable(
        "UPSTREAM_KEEPALIVE", "on or off: nginx -> server keep-alive alone", "KEEPALIVE", SERVE
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
        SERVE,
        unset="1" if defaults.PIN else "0",
    ),
    Variable(
        "LOAD",
        "wrk, locust (runs SCENARIO=saas) or oha (open loop: RATE=)",
        "the load package's default tool (bench/load)",
    ),
    Variable(
        "RATE",
        "LOAD=oha: comma list of offered requests/s, sent whatever the server does",
        "none",
        limits=(1, 1_000_000),
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
    ),
    Variable(
        "CPU_QUOTA",
        "CPUs the server may use (any fraction), a cgroup quota as containers set it, needs root",
        "none",
    ),
    Variable(
        "RUNTIME",
        "native, or docker: the server under test in its image (make images first)",
        defaults.RUNTIME,
        SERVE,
        unset=defaults.RUNTIME,
    ),
    Variable(
        "CPUS",
        "RUNTIME=docker: CPUs the container may use, docker's --cpus (e.g. 0.5, 1)",
        "none",
        SERVE,
    ),
    Variable(
        "MEMORY",
        "RUNTIME=docker: the container's memory limit, docker's --memory (e.g. 512m, 1g)",
        "none",
        SERVE,
    ),
    Variable(
        "NETWORK",
        "RUNTIME=docker: host (the host's network) or bridge (a harness-made one, 198.19.0.0/16)",
        defaults.NETWORK,
        SERVE,
        unset=defaults.NETWORK,
    ),
    Variable(
        "LIFECYCLE",
        "reload: each server's own graceful reload mid-window (needs LOAD=oha RATE=)",
        "none",
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
    ),
    Variable(
        "APP_ROUTES",
        "APP: TOML list of [[route]] (name, method, path, status, body, weight)",
        "routes.toml beside the app",
        SERVE,
    ),
    Variable(
        "APP_REQUIREMENTS",
        "APP: pinned requirements layered on each server's",
        "requirements.txt beside the app",
        SERVE,
    ),
    Variable(
        "APP_KIND", "APP: wsgi or asgi per entry, where it cannot be detected", "detected", SERVE
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
    Variable("NAME", "make study: a study below, a comma list, or all", "none", ("study",)),
    Variable(
        "ARMS",
        "make study: only these arms (comma list of the named studies' arm ids); the section "
        "shows each arm's latest run",
        "all",
        ("study",),
    ),
    Variable(
        "FORMAT", "make export: csv or json, one row per point on stdout", "none", ("export",)
    ),
    Variable("BASE", "make compare: the results directory compared against", "none", ("compare",)),
    Variable(
        "HEAD",
        "make compare: the results directory compared (HEAD/BASE ratios)",
        "none",
        ("compare",),
    ),
    Variable(
        "REFERENCE",
        "1: merge the shipped reference (results/reference/) into your summary",
        "0",
        (),
    ),
    Variable(
        "MACHINE",
        "a label for this machine in records and summaries",
        "hostname + identity",
        (),
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
    ),
)
BY_NAME: dict[str, Variable] = {v.name: v for v in VARIABLES}


def for_command(command: str) -> tuple[Variable, ...]:
    """The variables the Makefile passes to `python -m bench <command>`, in declaration order."""
    return tuple(v for v in VARIABLES if command in v.commands)


def help_lines(known: dict[str, str] | None = None) -> list[str]:
    """`make help`'s variables: name, what it does, the default (`known`: defaults found at
    run time, as LOAD's, the load tool that declares itself the default)."""
    known = known or {}
    return [
        f"  {v.name:<18} {v.about} (default: {known.get(v.name, v.default)})" for v in VARIABLES
    ]
