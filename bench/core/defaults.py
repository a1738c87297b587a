"""Defaults: the one definition of every default the CLI, the plan, the studies and the stack share.

Input: nothing (a leaf module: constants only, no imports from bench). Output: the value each
make variable takes when it is not set, and each key a study file may leave out. The Makefile's
`make help` and the README state them too; tests/bench/test_defaults.py holds `make help` to these.
"""

from __future__ import annotations

# -- make bench (python -m bench run) --------------------------------------------------------
SERVER = "granian"  # one server keeps a first `make bench` to minutes
# The server's own overhead, serialisation, one database round trip: TechEmpower's basics.
SCENARIOS = ("plaintext", "json", "db")
# The source paper's user counts (study sync-vs-gevent): below, at and past a sync worker pool.
CONCURRENCY = (5, 10, 30, 50, 100)
DURATION_S = 10  # enough requests for a stable p99 at these rates; a 5-point sweep stays short
WARMUP_S = 2  # connection pools and lazy imports fill before the measured window
# The CPU quota a command asks for where no run says one (make bench CPU_QUOTA=): the quota
# the cpu-quota study and reference.toml measure; 1 CPU does not bind on 2 CPUs shared with
# the load tool (issue 22): a command asking for it would measure the host again.
QUOTA_CPUS = 0.5
# the fewest trials that separate a 30 % difference 9 times in 10 at this machine's noise
# (sd 10 % of log req/s; `python -m bench.report.stats` prints the simulation)
TRIALS = 5
# TRIALS=auto: rounds of trials until every point's 95 % interval of req/s is within ±5 % of
# its estimate (a difference of 10 % or more then shows between two points), at least 3
# trials first (fewer give an interval too unsure of its own width to stop on), and no more
# rounds than the budget holds: 15 minutes by default, three times the default fixed run of
# one server on one scenario and concurrency at DURATION=10.
AUTO_TARGET = 0.05
AUTO_MIN_TRIALS = 3
AUTO_BUDGET_MIN = 15
AUTO_MAX_TRIALS = 100  # TRIALS' own upper bound: a quiet machine stops long before
# MARGIN=: TRIALS=auto's equivalence margin: two configurations whose req/s differ by less
# than 5 % are called equivalent when a race (bench.harness.racing) decides them. 5 %: the
# run-to-run noise of one trial on the project's 2-CPU machines is 2.5-6.5 % (ln sd 0.025 in
# the reference sessions; 0.064 by `make noise` on vm·a5ad, 2026-11-25), so a smaller margin
# takes more rounds than a user's budget holds, a larger one calls 1.08x equal; a race that
# stays undecided names the MARGIN that would decide it within its rounds.
AUTO_MARGIN_PCT = 5
# Host speed (bench.host.speed, bench.core.speedclass): two probes whose work per second
# differs by more than this share are two speeds of the host: sessions of one machine are two
# speed classes, a session whose probes drift this far is marked changed, and the start line
# says figures are not comparable with the last session's. Set from the probe's own A/A
# spread: 20 probes in a row on the project's 2-CPU AMD VM, quiet, spanned 8.8 % of their
# median (CV 2.7 %, 2026-11-29, docs/method.md); 15 % keeps one speed in one class while the
# boots the reference mixed (2.5-4.2x apart) are classes apart.
SPEED_TOLERANCE = 0.15
RACE_MARGIN = AUTO_MARGIN_PCT / 100
# TRIALS=auto's trial length when DURATION is not given: a race's noise is between server
# starts and rounds, not within a run (issue 30: wrk's 100 ms samples explain 2-16 % of the
# run-to-run noise; 2026-11-25, paired ln ratios of 5 s trials varied by 0.07-0.12 across
# rounds), so half the length buys about half again as many rounds (a trial is start-up,
# WARMUP and DURATION) and rounds are what decide a race.
RACE_DURATION_S = 5
# A race round's passes over its servers, started together (bench.harness.slices): 2 is
# A B … B A, pairs one slice apart with a linear drift over the round cancelled; each slice
# costs WARMUP + DURATION, so a round of k servers loads 2k slices instead of k trials.
RACE_SLICES = 2
RESULTS = "results"  # relative to where make runs: the checkout
PROXY = "none"  # the server alone; nginx in front is a choice (PROXY=nginx)
KEEPALIVE = True  # what wrk, browsers and HTTP/1.1 clients do unless told otherwise
PROXY_TIMEOUT_S = 60  # nginx's own default for proxy_connect_timeout and proxy_read_timeout
PIN = False  # pinning needs 2+ CPUs and halves what the server may use; opt in with PIN=1
# LOAD='s default is the load tool that declares itself the default (bench.load.default_name):
# tool names live in bench/load only.
LOCUST_WORKERS = 0  # one local Locust process; workers only when it saturates a core
RUNTIME = "native"  # the harness starts the server here; `compose` is set by make compose-bench
# RUNTIME=docker's network: the host's stack (no hop added); bridge measures the bridge's cost
NETWORK = "host"

# -- every run (studies may change the load timeout) -----------------------------------------
# wrk's --timeout: a response slower than this counts as a timeout error, not a latency sample.
# wrk's own 2 s would turn a queueing server's slow answers into errors.
LOAD_TIMEOUT_S = 10
# The first run of a scenario on a fresh server: a short load that wakes lazy code paths so the
# warmup of the first concurrency is not the only one that pays for them.
PRIMER_S = 1
PRIMER_CONCURRENCY = 8  # more than one worker's worth, fewer than overload the slowest server

# -- open-loop load (LOAD=oha) ----------------------------------------------------------------
# CONCURRENCY unset: the connection pool an arrival rate is sent from holds the requests in
# flight if each took 50 ms (Little's law): ample for a server within a latency objective of
# tens of ms; past that arrivals queue in the tool, and that wait counts in the latency
# (latency is measured from each request's intended send time).
OPEN_LOOP_POOL_S = 0.05
OPEN_LOOP_POOL_MIN = 10  # a low rate still gets some parallelism
OPEN_LOOP_POOL_MAX = 1000  # file descriptors and the server's accept queue stay reasonable

# -- make capacity ---------------------------------------------------------------------------
SLO_P99_MS = 100  # a common web latency objective; set SLO_P99_MS to yours
# LIFECYCLE=reload and RECYCLE= runs: an arrival answered 2xx later than this (from its
# intended send time) is late, and a reload has recovered when 99 % of each half second's
# arrivals are answered within it again. One fixed limit for every server, the default
# objective above: a limit from each server's own p99 before the signal (3x it, as until
# record format 16) moved with the VM's noise (eventlet's was 1.58 s, uwsgi's 0.11 s).
LATE_LIMIT_MS = float(SLO_P99_MS)
CAPACITY_BUDGET_S = (
    480  # per server, scenario and trial: ~40 steps of 1 s warmup + 5 s + gaps (7 at the knee)
)
CAPACITY_START_RPS = 50  # below any server's capacity here; doubled until a step fails
CAPACITY_PRECISION = 0.05  # bisect until the passing and failing rates are within 5 %
CAPACITY_MIN_ACHIEVED = 0.99  # served at least 99 % of the offered rate
CAPACITY_DURATION_S = 5  # per step: 5,000+ samples at 1,000 req/s: a p99 from 50 of them
CAPACITY_WARMUP_S = 1  # per step, at the step's rate
# Past capacity: what a user sees when the load grows beyond it.
CAPACITY_PAST = (1.2, 1.5)
# Below capacity: the latency a user sees with headroom.
CAPACITY_PROFILE = (0.5, 0.8)
# Repeated steps around the search's result: single 5 s steps near the knee flipped their
# verdict in 5 of 11 repeats, so the capacity is the crossing of the pass share over these
# rates (bench.report.stats.capacity). One round of them per trial, each trial a fresh start of
# the server with the servers shuffled (the trial is the unit: two capacity runs of one
# server differed by 7 % when the repeats shared one start, each interval missing the other's
# estimate); 3 trials cover the truth in 94-99 % of simulated searches (docs/statistics.md).
# Denser within ±10 % of the result, where the crossing lies: ~45 s a round.
CAPACITY_KNEE = (0.8, 0.9, 0.95, 1.0, 1.05, 1.1, 1.25)
CAPACITY_KNEE_TRIALS = 3  # make capacity's default TRIALS

# -- study files: what [run] or an arm may leave out -----------------------------------------
STUDY_SCENARIO = "upstream"  # the source documents are about slow I/O behind the server
STUDY_CONCURRENCY = (10,)
STUDY_WARMUP_S = 0  # the source experiments measured from a cold start
STUDY_TRIALS = 3  # the fewest trials that give a verdict an interval (bench.report.stats.decide)

# -- make soak (memory over time at a fixed rate) --------------------------------------------
SOAK_DURATION_S = 600  # source 002's long run: 10 minutes
SOAK_RATE = 100  # req/s: about source 002's 100 users (66-69 req/s served there)
SOAK_INTERVAL_S = 5  # RSS of every server process every 5 s: 120 samples in 10 minutes
SOAK_WARMUP_S = 5  # pools and lazy imports filled before memory is followed
SOAK_SCENARIO = "db"  # a database round trip per request: pools, drivers, the app's objects

# -- make overhead (bench/overhead.py) --------------------------------------------------------
OVERHEAD_ROUNDS = 8  # rounds per server and route: a median and a spread under others' load
# A thread-per-request server and an async one, a route with no I/O and one with a database
# round trip: the observer's cost where it is largest (plaintext) and where it is typical.
OVERHEAD_SERVERS = "gunicorn-sync,granian"
OVERHEAD_SCENARIOS = "plaintext,db"
OVERHEAD_CONCURRENCY = 50
OVERHEAD_DURATION_S = 5

# -- make noise (bench/harness/nested.py) ------------------------------------------------------
# One server in a nested design: rounds × server starts per round × runs per start (12
# starts of 3 runs at these values, a warm-up start first: minutes, not hours). Two starts per
# round are the A/A race's A and A′; 6 rounds give the race 4 looks past its first 3 rounds
# (a pair is judged on 3 paired rounds at least) and the round component 5 degrees of freedom.
NOISE_ROUNDS = 6
NOISE_STARTS = 2
NOISE_RUNS = 3  # runs per start: 2 degrees of freedom each for the run-to-run noise
NOISE_SCENARIO = "db"  # the figures are /db's (a database round trip per request)
NOISE_CONCURRENCY = 50
NOISE_DURATION_S = 5  # trial length barely matters (issue 30): wrk's 100 ms samples explain 2-16 %

# make tune: where a tuned configuration holds when SCENARIO and CONCURRENCY are not given (the
# issue's point: db at 50 connections), and its objective
TUNE_SCENARIO = "db"
TUNE_CONCURRENCY = 50
TUNE_OBJECTIVE = "rps"
# make tune: a configuration failing more than this share of its requests is out (seed 002's
# 2xCPU+1 rule failed 3.33 % of them and vCPU workers with 2x threads 0.76 %: an error rate
# that differs is an answer of its own, not a faster configuration)
TUNE_MAX_FAILED_SHARE = 0.01
