"""The plan: validated options -> the ordered list of runs.

Input: Options (already validated by bench.cli). Output: Blocks, one per (trial, server) —
the server is started once per block and measured on every scenario × concurrency in it.
A warm-up round (trial 0: each server's first start, one short run) comes first; it is
recorded, never analysed. Servers come in a random order per trial (seeded, recorded), so
that drift of the machine over time does not favour whichever server always runs first.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from bench.core import defaults, scenario
from bench.core.app import AppSpec
from bench.core.protocol import HTTP1

# Scenarios are declared in bench.core.scenario; which load tool drives which, bench.load says.
SCENARIOS = scenario.SCENARIOS
_WS, _WS_BYTES, _WS_RATE = scenario.WS, scenario.WS_BYTES, scenario.WS_RATE
_WS_IDLE_RATE = scenario.WS_IDLE_RATE
# alb: nginx configured as a cloud load balancer (proxy/alb.conf.template, issue 15)
PROXIES = ("none", "nginx", "alb")
# Mode.runtime: native, the harness started the server here; compose, in containers (make
# compose-bench); docker, the server under test in its image (RUNTIME=docker,
# bench.stack.containers)
RUNTIMES = ("native", "docker", "compose")
# NETWORK= with RUNTIME=docker: the host's network stack, or a bridge the harness creates in
# 198.19.0.0/16 (bench.host.docker.create_bridge)
NETWORKS = ("host", "bridge")


@dataclass(frozen=True)
class Objective:
    """A capacity search's target (make capacity): the highest offered rate at which p99
    (and p99.9 when given) stay within these, no request fails and at least
    `min_achieved` of the offered rate is served."""

    p99_ms: float
    p999_ms: float | None = None
    budget_s: int = defaults.CAPACITY_BUDGET_S  # per server: the search stops past it
    start_rps: int = defaults.CAPACITY_START_RPS
    precision: float = defaults.CAPACITY_PRECISION
    min_achieved: float = defaults.CAPACITY_MIN_ACHIEVED

    def to_dict(self) -> dict[str, float | int | None]:
        """The record's metadata.capacity.objective."""
        return {
            "p99_ms": self.p99_ms,
            "p999_ms": self.p999_ms,
            "budget_s": self.budget_s,
            "start_rps": self.start_rps,
            "precision": self.precision,
            "min_achieved": self.min_achieved,
        }


@dataclass(frozen=True)
class Precision:
    """TRIALS=auto: rounds of trials until every point's 95 % interval half-width is within
    `target` (a share of its estimate) or the budget ends; never fewer than `min_trials`."""

    target: float = defaults.AUTO_TARGET
    budget_s: int = defaults.AUTO_BUDGET_MIN * 60
    min_trials: int = defaults.AUTO_MIN_TRIALS
    max_trials: int = defaults.AUTO_MAX_TRIALS
    # Two or more configurations race (bench.harness.racing): a pair is equivalent within
    # ±margin; max_looks bounds the looks the error is spent over (set when the race starts,
    # from the budget: None before).
    margin: float = defaults.RACE_MARGIN
    max_looks: int | None = None

    def to_dict(self) -> dict[str, float | int | None]:
        """The record's metadata.trials_auto."""
        return {
            "target": self.target,
            "budget_s": self.budget_s,
            "min_trials": self.min_trials,
            "max_trials": self.max_trials,
            "margin": self.margin,
            "max_looks": self.max_looks,
        }


@dataclass(frozen=True)
class StudySettings:
    """What only a study file sets (bench/studies): never a make variable."""

    paths: dict[str, str] = field(default_factory=dict)  # scenario -> another URL path
    app_env: dict[str, str] = field(default_factory=dict)  # extra environment of the app
    # a response slower than this counts as a timeout error
    load_timeout_s: int = defaults.LOAD_TIMEOUT_S
    meta: dict[str, object] = field(default_factory=dict)  # into every record's metadata


@dataclass(frozen=True)
class Mode:
    """What the command sets (make capacity, make soak, make compose-bench), not a variable."""

    # native: the harness started the server here; compose: in containers (make compose-bench)
    runtime: str = defaults.RUNTIME
    objective: Objective | None = None  # make capacity: search each server's capacity
    # make soak: RSS of every server process sampled this often (seconds; bench.observe.soak)
    soak_interval_s: float | None = None


@dataclass(frozen=True)
class Options:
    """Everything a harness run needs, validated, in three concerns: the fields of its own are
    what was asked, one per make variable of bench/core/variables.py (a study arm asks through
    the same fields); `study` what only a study file sets; `mode` what the command sets."""

    servers: tuple[str, ...]
    scenarios: tuple[str, ...]
    concurrency: tuple[int, ...]
    duration_s: int
    warmup_s: int
    trials: int  # with `precision`: the rounds run before the first check
    arch: str
    results: Path
    overrides: dict[str, int]  # WORKERS, THREADS, CONNECTIONS, BACKLOG where set
    load_threads: int
    seed: int
    proxy: str | None = None  # "nginx", "alb", or None: the load tool talks to the server directly
    keepalive: bool = defaults.KEEPALIVE  # client keep-alive (off: wrk sends `Connection: close`)
    upstream_keepalive: bool | None = None  # nginx -> server; None without a proxy
    proxy_timeout_s: int = defaults.PROXY_TIMEOUT_S  # nginx's connect/read timeouts
    pin: bool = defaults.PIN  # load tool and server on separate CPUs
    load_tool: str | None = None  # LOAD=; None: bench.load's default tool
    load_workers: int = defaults.LOCUST_WORKERS  # Locust worker processes (0: one local process)
    target: str | None = None  # http://host:port of a server running elsewhere (TARGET=)
    # RATE=: offered requests/s of an open-loop tool (oha); empty for closed-loop tools. With
    # rates, an empty `concurrency` means: each rate's connection pool by pool_for().
    rates: tuple[int, ...] = ()
    # CPU_QUOTA=: the server in a cgroup of its own limited to this many CPUs (bench.host.cgroup)
    cpu_quota: float | None = None
    # LIFECYCLE=: an event in the middle of each measured window ("reload": bench.observe.lifecycle)
    lifecycle: str | None = None
    # RECYCLE=: workers recycle after this many requests, by the server's own flags
    recycle: int | None = None
    # RUNTIME=docker: the container's limits (the engine's --cpus and --memory); None: none
    cpus: float | None = None
    memory_bytes: int | None = None
    network: str = defaults.NETWORK  # RUNTIME=docker: host or bridge (NETWORKS)
    # APP=: the user's own app instead of app_common (bench.core.app); its routes are the
    # scenarios (`<app>:<route>`)
    app: AppSpec | None = None
    # APP_FLAVOR=: app_common's framework app (Flask/Quart) or its raw one (no framework):
    # bench.core.registry.FLAVORS
    app_flavor: str = "framework"
    # TRIALS=auto: more rounds after `trials` until precise or past BUDGET; None: fixed trials
    precision: Precision | None = None
    # MARGIN=: TRIALS=auto's equivalence margin, a fraction (0.05: req/s within 5 % are equal)
    margin: float = defaults.AUTO_MARGIN_PCT / 100
    # PROTOCOL=: how the load talks to the server (bench.core.protocol); STREAMS=: HTTP/2
    # requests in flight per connection
    protocol: str = HTTP1
    streams: int = 1
    # PYTHON=: the interpreter every server's venv is made from (bench/core/pythons.py: "3.13t"
    # free-threaded, "3.13" the same build with the GIL); None: the usual python3
    python: str | None = None
    # MESSAGE_BYTES= and MESSAGE_RATE=: the WebSocket scenarios' message size and rate per
    # connection; None: the scenario's declared ones (bench.core.scenario)
    message_bytes: int | None = None
    message_rate: int | None = None
    # WAIT=: a second harness waits for the machine-wide lock (False: refuses at once)
    wait: bool = True
    # TUNED=1 (make bench): server -> (its answer file under RESULTS, the knobs make tune
    # found for this machine and point); empty: every server as declared
    tuned: dict[str, tuple[str, dict[str, int]]] = field(default_factory=dict)
    study: StudySettings = StudySettings()
    mode: Mode = Mode()


@dataclass(frozen=True)
class RunSpec:
    """One measured run."""

    server: str
    scenario: str
    concurrency: int
    trial: int
    path_override: str | None = None
    rate: int | None = None  # offered requests/s (open-loop); None: closed-loop
    # a race round's pass over its servers (1: in the round's order, 2: back, …) when they
    # were started together and loaded in slices (bench.harness.slices); 0: its own start
    slice: int = 0

    @property
    def path(self) -> str:
        """The URL path the load tool requests."""
        return self.path_override or SCENARIOS[self.scenario].path


@dataclass(frozen=True)
class Block:
    """One server start: every run measured against it, in order."""

    trial: int
    server: str
    runs: tuple[RunSpec, ...]
    # the server's first start in this invocation (trial 0): measured and recorded with
    # metadata.warmup_start, never analysed (docs/method.md says why)
    warmup: bool = False


def path_of(options: Options, scenario: str) -> str | None:
    """The URL path of a scenario when it is not the declared one: an APP= route's, or a
    study's own path; None: the scenario's declared path."""
    if options.app is not None:
        return {options.app.scenario(r): r.path for r in options.app.loaded_routes}.get(scenario)
    declared = SCENARIOS.get(scenario)
    wants = options.message_bytes is not None or options.message_rate is not None
    if declared is not None and declared.needs == _WS and wants:
        size = options.message_bytes or _WS_BYTES
        # An idle scenario's rate stays 0 whatever MESSAGE_RATE says: it sends nothing.
        idle = declared.path.endswith(f"rate={_WS_IDLE_RATE}")
        rate = _WS_IDLE_RATE if idle else options.message_rate or _WS_RATE
        return f"{urlsplit(declared.path).path}?bytes={size}&rate={rate}"
    return options.study.paths.get(scenario)


def pool_for(rate: int) -> int:
    """An open-loop tool's connection pool at a rate: the requests in flight if each took
    defaults.OPEN_LOOP_POOL_S (Little's law), within the pool's bounds."""
    wanted = math.ceil(rate * defaults.OPEN_LOOP_POOL_S)
    return max(defaults.OPEN_LOOP_POOL_MIN, min(defaults.OPEN_LOOP_POOL_MAX, wanted))


def points(options: Options) -> list[tuple[int, int | None]]:
    """(connections, rate) of each measured point of a scenario, in order."""
    if not options.rates:
        return [(conc, None) for conc in options.concurrency]
    return [
        (conc, rate) for rate in options.rates for conc in options.concurrency or (pool_for(rate),)
    ]


Spot = tuple[str, int, int | None]  # a measured point: (scenario, connections, offered rate)


def rounds(
    options: Options,
    racing: Callable[[], Collection[str] | Mapping[str, Collection[Spot]]] | None = None,
) -> Iterator[list[Block]]:
    """Every trial's blocks in turn, servers shuffled within each (one seeded generator, so a
    fixed plan and TRIALS=auto's first rounds run in the same order); endless. `racing`, asked
    before each round, names the servers still in a race: only they run it; as a mapping,
    each server's points still racing: only those are measured."""
    rng = random.Random(options.seed)
    for trial in itertools.count(1):
        still = racing() if racing is not None else None
        order = [s for s in options.servers if still is None or s in still]
        rng.shuffle(order)
        blocks = []
        for server in order:
            spots = still.get(server) if isinstance(still, Mapping) else None
            runs = tuple(
                RunSpec(server, scenario, conc, trial, path_of(options, scenario), rate)
                for scenario in options.scenarios
                for conc, rate in points(options)
                if spots is None or (scenario, conc, rate) in spots
            )
            if runs:
                blocks.append(Block(trial, server, runs))
        yield blocks


def warms_up(options: Options) -> bool:
    """Whether a plan starts with a warm-up round: not against a server started elsewhere
    (TARGET=), nor before a capacity search or a soak (their own steps and hour are long)."""
    mode = options.mode
    return options.target is None and mode.objective is None and mode.soak_interval_s is None


def warmup_round(options: Options, servers: Iterable[str] | None = None) -> list[Block]:
    """Round 0: one start per server with one short run (the first scenario's first point,
    DURATION long), in the seeded order of the trials; `servers`: only these (a study's
    later arms do not warm up a server an earlier arm started)."""
    wanted = set(options.servers if servers is None else servers)
    order = [s for s in options.servers if s in wanted]
    random.Random(f"warm-up {options.seed}").shuffle(order)
    scenario = options.scenarios[0]
    conc, rate = points(options)[0]
    return [
        Block(
            0, server, (RunSpec(server, scenario, conc, 0, path_of(options, scenario), rate),), True
        )
        for server in order
    ]


def make_plan(options: Options, warm: Iterable[str] | None = None) -> list[Block]:
    """Blocks in execution order: the warm-up round (each server's first start, where
    warms_up; `warm`: only these servers), then trials in turn, servers shuffled within each."""
    first = warmup_round(options, warm) if warms_up(options) else []
    return first + [
        block for blocks in itertools.islice(rounds(options), options.trials) for block in blocks
    ]


def arm_plans(arms: list[Options]) -> list[tuple[Options, list[Block]]]:
    """Each arm's plan (a study's arms, or the one Options of make bench); each server warms
    up once per invocation, in the first arm that runs it."""
    seen: set[str] = set()
    plans = []
    for opts in arms:
        plans.append((opts, make_plan(opts, warm=[s for s in opts.servers if s not in seen])))
        seen.update(opts.servers)
    return plans


def run_seconds(options: Options, scenario_primed: bool) -> int:
    """Load time of one run: primer (first run of a scenario), warmup, measurement."""
    return (0 if scenario_primed else defaults.PRIMER_S) + options.warmup_s + options.duration_s


def sliced(options: Options) -> bool:
    """Whether this arm's rounds are a race's (TRIALS=auto, two or more servers, started here
    natively, no capacity search, not a study arm): its servers started together each round
    and loaded in defaults.RACE_SLICES slices per point (bench.harness.slices)."""
    return (
        options.precision is not None
        and len(options.servers) > 1
        and options.target is None
        and options.mode.objective is None
        and options.mode.runtime == "native"
        and not options.study.meta
    )


def estimate_seconds(options: Options, blocks: list[Block]) -> int:
    """Load time of the whole plan, for the progress line (start-up and verify not counted);
    a race's rounds load each point once per slice."""
    slices = defaults.RACE_SLICES if sliced(options) else 1
    run_s = options.warmup_s + options.duration_s
    return sum(
        len({run.scenario for run in block.runs}) * defaults.PRIMER_S
        + len(block.runs) * run_s * (1 if block.warmup else slices)
        for block in blocks
    )
