"""Bad input through a real `make`: every case refused by the pre-check with one line, before
set-up, with nothing created; values that a shell would run execute nothing.

Each case runs `make -s <target> VAR=...` in the checkout with PYWEBBENCH_SETUP_MARKER set
(the Makefile touches it when set-up starts: its absence proves the refusal came first) and
RESULTS pointing into a fresh temporary directory that must stay absent. Wall-clock time is
not asserted: nothing created before set-up is what "refused before anything" means here.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from bench.core.registry import ROOT
from bench.core.variables import BY_NAME

# (target, variables, what the one line says)
# BASE and HEAD given: a bound is parsed (and refused) before the directories are read.
COMPARED = {"BASE": "results/reference", "HEAD": "tests/fixtures/aa/head"}
UNKNOWN = [
    ("bench", {"SERVERS": "granian"}, "SERVERS is not a variable; did you mean SERVER?"),
    ("bench", {"server": "nosuch"}, "server is not a variable; did you mean SERVER?"),
    ("capacity", {"SLO_P99": "100"}, "did you mean SLO_P99_MS?"),
    ("study", {"NAMES": "reload"}, "NAMES is not a variable; did you mean NAME?"),
    ("report", {"RESULT": "x"}, "did you mean RESULTS?"),
    ("export", {"FROMAT": "csv"}, "did you mean FORMAT?"),
    ("help", {"DURATON": "5"}, "did you mean DURATION?"),
    ("test", {"PYTEST_ARG": "-x"}, "did you mean PYTEST_ARGS?"),
    ("compare", {"BASES": "a"}, "did you mean BASE?"),
    ("remote", {"HOSTS": "a@b"}, "did you mean HOST?"),
    ("lint", {"XYZZY": "1"}, "XYZZY is not a variable; valid: SERVER"),
]
EMPTY = [
    ("bench", {"SERVER": ""}, "unknown SERVER ''; valid: daphne, flask-dev"),
    ("bench", {"DURATION": ""}, "DURATION='' is not a whole number (1..86400)"),
    ("study", {"NAME": ""}, "unknown NAME ''; valid: accept-queue"),
    ("bench", {"RESULTS": ""}, "RESULTS= is set but empty"),
    ("images", {"ARCH": ""}, "unknown ARCH ''"),
    ("compare", {**COMPARED, "FAIL_BELOW": ""}, "FAIL_BELOW='' is not a number"),
]
VALUES = [
    ("bench", {"DURATION": "0"}, "DURATION=0 is out of range 1..86400"),
    ("bench", {"DURATION": "abc"}, "DURATION='abc' is not a whole number"),
    ("bench", {"CONCURRENCY": "10,0"}, "CONCURRENCY=0 is out of range"),
    ("bench", {"TRIALS": "many"}, "TRIALS='many' is not a whole number (1..100) or auto"),
    ("bench", {"WARMUP": "601"}, "WARMUP=601 is out of range 0..600"),
    ("bench", {"SCENARIO": "nosuch"}, "unknown SCENARIO 'nosuch'; valid: plaintext"),
    ("bench", {"ARCH": "sparc"}, "unknown ARCH 'sparc'; valid: aarch64"),
    ("bench", {"KEEPALIVE": "maybe"}, "KEEPALIVE='maybe' is not a switch; valid: on, off"),
    ("bench", {"PROXY": "haproxy"}, "unknown PROXY 'haproxy'; valid: none, nginx, alb"),
    ("bench", {"LOAD": "ab"}, "unknown LOAD 'ab'; valid: wrk"),
    ("bench", {"REFERENCE": "yes"}, "unknown REFERENCE 'yes'; valid: 0, 1"),
    ("bench", {"RUNTIME": "compose"}, "unknown RUNTIME 'compose'; valid: native, docker"),
    ("bench", {"RUNTIME": "podman"}, "unknown RUNTIME 'podman'; valid: native, docker"),
    ("bench", {"CPU_QUOTA": "lots"}, "CPU_QUOTA='lots' is not a number of CPUs"),
    ("bench", {"TARGET": "ftp://x"}, "TARGET='ftp://x' is not http://host:port"),
    ("bench", {"MACHINE": "bad label!"}, "MACHINE='bad label!': a label of 1-40"),
    ("bench", {"SEED": "-1"}, "SEED=-1 is out of range"),
    ("bench", {"LOAD": "oha", "RATE": "0"}, "RATE=0 is out of range 1..1000000"),
    ("serve", {"NETWORK": "nat"}, "unknown NETWORK 'nat'; valid: host, bridge"),
    ("serve", {"RUNTIME": "docker", "CPUS": "abc"}, "CPUS='abc' is not a number of CPUs"),
    ("serve", {"RUNTIME": "docker", "MEMORY": "12q"}, "MEMORY='12q' is not a size"),
    ("export", {"FORMAT": "xml"}, "unknown FORMAT 'xml'; valid: csv, json"),
    ("capacity", {"SLO_P99_MS": "abc"}, "SLO_P99_MS='abc' is not a whole number"),
    ("capacity", {"CAPACITY_BUDGET": "5"}, "CAPACITY_BUDGET=5 is out of range 10..86400"),
    ("soak", {"SOAK_INTERVAL": "0"}, "SOAK_INTERVAL=0 is out of range 1..600"),
    ("overhead", {"ROUNDS": "0"}, "ROUNDS=0 is out of range 1..100"),
    ("overhead", {"LEGACY": "maybe"}, "LEGACY='maybe' is not a switch"),
    ("noise", {"STARTS": "0"}, "STARTS=0 is out of range 1..20"),
    ("noise", {"RUNS": "many"}, "RUNS='many' is not a whole number"),
    ("images", {"SERVER": "nope"}, "unknown SERVER 'nope'; valid: daphne, flask-dev"),
    ("study", {"NAME": "nope"}, "unknown NAME 'nope'; valid: accept-queue"),
    ("study", {"NAME": "lb-keepalive-race", "ARMS": "nope"}, "unknown ARMS 'nope'; valid:"),
    ("bench", {"TRIALS": "auto", "MARGIN": "60"}, "MARGIN=60 is out of range 1..50"),
    ("bench", {"WAIT": "maybe"}, "WAIT='maybe' is not a switch"),
    ("bench", {"CONFIRM": "yes"}, "CONFIRM='yes' is not a switch"),
    ("compose-up", {"NGINX_PORT": "0"}, "NGINX_PORT=0 is out of range 1..65535"),
    ("test", {"PYTEST_ARGS": "-x\n-k"}, "PYTEST_ARGS='-x\\n-k' holds a line break"),
    ("report", {"PRICE": "amd64"}, "PRICE='amd64': give <arch or MACHINE label>:<dollars"),
    ("bench", {"PRICE": "amd64:cheap"}, "PRICE='amd64:cheap': give <arch or MACHINE label>"),
    ("report", {"PRICE": "amd64:1,amd64:2"}, "each once, comma-separated"),
    ("remote", {"HOST": "-oProxyCommand=x"}, "HOST='-oProxyCommand=x': give the machine ssh"),
    (
        "remote",
        {"HOST": "a@b", "SERVER": "nope"},
        "unknown SERVER 'nope'; valid: daphne, flask-dev",
    ),
    ("remote", {"HOST": "a@b", "DURATION": "0"}, "DURATION=0 is out of range 1..86400"),
    ("remote", {"HOST": "nobody@127.0.0.1"}, "ssh cannot reach nobody@127.0.0.1 without a prompt"),
    ("bench", {"PROTOCOL": "http2"}, "unknown PROTOCOL 'http2'; valid: http1, https1, h2c, h2"),
    ("bench", {"PROTOCOL": "h2c", "LOAD": "oha", "RATE": "9", "STREAMS": "0"}, "STREAMS=0"),
    ("compare", {**COMPARED, "FAIL_BELOW": "abc"}, "FAIL_BELOW='abc' is not a number; give a"),
    ("compare", {**COMPARED, "FAIL_BELOW": "0"}, "FAIL_BELOW=0 is out of range 0.01..1 (req/s"),
    ("compare", {**COMPARED, "FAIL_BELOW": "2"}, "FAIL_BELOW=2 is out of range 0.01..1 (req/s"),
    ("compare", {**COMPARED, "FAIL_ABOVE": "0.9"}, "FAIL_ABOVE=0.9 is out of range 1..100 (p99"),
    ("compare", {**COMPARED, "FAIL_ABOVE": "nan"}, "FAIL_ABOVE=nan is out of range 1..100"),
]
RULES = [
    ("bench", {"CPUS": "1"}, "CPUS needs RUNTIME=docker"),
    ("bench", {"MEMORY": "1g"}, "MEMORY needs RUNTIME=docker"),
    ("bench", {"UPSTREAM_KEEPALIVE": "off"}, "UPSTREAM_KEEPALIVE needs PROXY=nginx or alb"),
    ("bench", {"LIFECYCLE": "reload"}, "LIFECYCLE needs LOAD=oha"),
    ("bench", {"RATE": "100"}, "RATE needs LOAD=oha"),
    ("bench", {"LOAD": "oha"}, "LOAD=oha needs RATE="),
    ("bench", {"BUDGET": "5"}, "BUDGET needs TRIALS=auto"),
    ("bench", {"MARGIN": "10"}, "MARGIN needs TRIALS=auto"),
    ("bench", {"LOCUST_WORKERS": "2"}, "LOCUST_WORKERS needs LOAD=locust"),
    ("bench", {"APP_ROUTES": "routes.toml"}, "APP_ROUTES needs APP="),
    ("bench", {"APP_KIND": "wsgi"}, "APP_KIND needs APP="),
    ("bench", {"TARGET": "http://127.0.0.1:9", "PROXY": "nginx"}, "PROXY=nginx and TARGET="),
    ("bench", {"TARGET": "http://127.0.0.1:9", "RECYCLE": "100"}, "RECYCLE and TARGET="),
    ("bench", {"RUNTIME": "docker", "CPU_QUOTA": "0.5"}, "RUNTIME=docker and CPU_QUOTA="),
    ("bench", {"RUNTIME": "docker", "PIN": "1"}, "RUNTIME=docker and PIN="),
    ("serve", {"NETWORK": "bridge"}, "NETWORK=bridge needs RUNTIME=docker"),
    ("capacity", {"LOAD": "wrk"}, "make capacity needs a fixed arrival rate; LOAD=wrk"),
    ("capacity", {"TRIALS": "auto"}, "make capacity TRIALS=auto races two or more servers"),
    ("soak", {"TRIALS": "auto"}, "TRIALS=auto applies to make bench"),
    ("capacity", {"RECYCLE": "100"}, "RECYCLE: make capacity searches a steady server's rate"),
    ("soak", {"RATE": "100,200"}, "make soak runs at one fixed rate"),
    ("soak", {"DURATION": "10"}, "DURATION=10 holds fewer than 3 samples"),
    ("soak", {"TARGET": "http://127.0.0.1:9"}, "make soak samples the server's memory here"),
    ("serve", {"SERVER": "granian,uvicorn"}, "make serve starts one server"),
    ("overhead", {"CONCURRENCY": "10,50"}, "make overhead measures one CONCURRENCY"),
    ("noise", {"SERVER": "granian,uvicorn"}, "make noise measures one SERVER"),
    ("noise", {"SCENARIO": "db,json"}, "make noise measures one SCENARIO"),
    ("noise", {"CONCURRENCY": "10,50"}, "make noise measures one CONCURRENCY"),
    ("noise", {"RATE": "100"}, "RATE: not with make noise"),
    ("noise", {"TARGET": "http://127.0.0.1:9"}, "TARGET: not with make noise"),
    ("noise", {"LIFECYCLE": "reload"}, "LIFECYCLE: not with make noise"),
    ("noise", {"RECYCLE": "100"}, "RECYCLE: not with make noise"),
    ("noise", {"TRIALS": "auto"}, "TRIALS: not with make noise"),
    ("tune", {"KNOBS": "workers=1,x"}, "KNOBS: workers=1,x: values are positive whole numbers"),
    ("tune", {"KNOBS": "workers"}, "KNOBS: 'workers' is not <knob>=<values>"),
    ("tune", {"KNOBS": "workers=1 workers=2"}, "KNOBS names workers twice"),
    ("tune", {"SERVER": "granian", "KNOBS": "pool=1,2"}, "granian has no knob pool; valid:"),
    ("tune", {"SERVER": "gunicorn-gevent"}, "declares no search space"),
    ("tune", {"OBJECTIVE": "speed"}, "unknown OBJECTIVE 'speed'; valid: rps, p99, capacity"),
    ("tune", {"OBJECTIVE": "capacity"}, "OBJECTIVE=capacity: not supported by make tune yet"),
    ("tune", {"SCENARIO": "db,json"}, "make tune tunes at one SCENARIO"),
    ("tune", {"CONCURRENCY": "10,50"}, "make tune tunes at one CONCURRENCY"),
    ("tune", {"TRIALS": "5"}, "TRIALS: not with make tune"),
    ("tune", {"WORKERS": "2"}, "WORKERS: not with make tune"),
    ("tune", {"TARGET": "http://127.0.0.1:9"}, "TARGET: not with make tune"),
    ("tune", {"BUDGET": "0"}, "BUDGET=0 is out of range 1..1440"),
    ("tune", {"MARGIN": "60"}, "MARGIN=60 is out of range 1..50"),
    ("tune", {"MEMORY": "512m"}, "MEMORY needs RUNTIME=docker"),
    ("bench", {"TUNED": "maybe"}, "TUNED='maybe' is not a switch"),
    ("bench", {"PROTOCOL": "h2c"}, "PROTOCOL=h2c needs LOAD=oha"),
    ("bench", {"PROTOCOL": "https1", "PROXY": "nginx"}, "PROTOCOL=https1 and PROXY="),
    (
        "bench",
        {"PROTOCOL": "https1", "TARGET": "http://127.0.0.1:9"},
        "PROTOCOL=https1 and TARGET=",
    ),
    ("bench", {"PROTOCOL": "https1", "RUNTIME": "docker"}, "PROTOCOL=https1 and RUNTIME="),
    ("bench", {"STREAMS": "4"}, "STREAMS needs PROTOCOL=h2c or h2"),
    (
        "bench",
        {"PROTOCOL": "h2", "LOAD": "oha", "RATE": "9", "KEEPALIVE": "off"},
        "KEEPALIVE=off needs PROTOCOL=http1 or https1",
    ),
    # APP_FLAVOR=: one of two; raw only on app_common, here, natively, on a Python server
    # and on the scenarios the raw app serves
    ("bench", {"APP_FLAVOR": "plain"}, "unknown APP_FLAVOR 'plain'; valid: framework, raw"),
    ("bench", {"APP_FLAVOR": "raw", "APP": "app_common/wsgi.py:app"}, "APP_FLAVOR and APP="),
    ("bench", {"APP_FLAVOR": "framework", "APP": "x.py:app"}, "APP_FLAVOR and APP= cannot"),
    ("bench", {"APP_FLAVOR": "raw", "TARGET": "http://127.0.0.1:9"}, "APP_FLAVOR=raw and TARGET"),
    ("bench", {"APP_FLAVOR": "raw", "RUNTIME": "docker"}, "APP_FLAVOR=raw and RUNTIME="),
    (
        "bench",
        {"APP_FLAVOR": "raw", "SCENARIO": "db,queries"},
        "SCENARIO=queries: not served by the raw app (APP_FLAVOR=raw serves plaintext, json, db)",
    ),
    (
        "bench",
        {"APP_FLAVOR": "raw", "SERVER": "granian,nginx-static"},
        "SERVER=nginx-static is not a Python server",
    ),
    ("capacity", {"APP_FLAVOR": "raw", "SCENARIO": "upstream"}, "not served by the raw app"),
    ("soak", {"APP_FLAVOR": "raw", "SCENARIO": "fortunes"}, "not served by the raw app"),
    ("overhead", {"APP_FLAVOR": "raw", "SCENARIO": "queries"}, "not served by the raw app"),
    ("noise", {"APP_FLAVOR": "raw", "SCENARIO": "compute"}, "not served by the raw app"),
    ("tune", {"APP_FLAVOR": "raw"}, "APP_FLAVOR=raw: not with make tune yet"),
]
REQUIRED = [
    ("study", {}, "NAME is required by make study; valid: accept-queue"),
    ("export", {}, "FORMAT is required by make export; valid: csv, json"),
    ("compare", {}, "BASE is required by make compare"),
    ("compare", {"BASE": "results/reference"}, "HEAD is required by make compare"),
    ("remote", {}, "HOST is required by make remote"),
]
FILES = [
    ("report", {"RESULTS": "/nonexistent/deeper"}, "does not exist; nothing to report"),
    ("export", {"FORMAT": "csv", "RESULTS": "/nonexistent"}, "does not exist; nothing to export"),
    ("bench", {"RESULTS": "/etc/passwd/x"}, "is not a writable directory"),
    ("bench", {"RESULTS": "/proc/pywebbench"}, "is not a writable directory"),
    ("bench", {"APP": "/nonexistent/app.py:app"}, "is neither a .py file nor a package folder"),
    ("bench", {"APP": "app_common/wsgi.py:no such"}, "is not <path or module>:<callable>"),
    ("bench", {"APP": "nosuchmodule:app"}, "no module nosuchmodule"),
    ("compare", {"BASE": "/", "HEAD": "results/reference"}, "BASE='/' holds no records"),
    ("compare", {"BASE": "results/reference", "HEAD": "results/reference"}, "same directory"),
]
PLANS = [
    ("bench", {"SERVER": "nginx-static", "SCENARIO": "db"}, "nothing would run"),
    ("noise", {"SERVER": "nginx-static"}, "nothing would run"),
    ("bench", {"SERVER": "all", "DURATION": "86400", "TRIALS": "100"}, "days of load"),
    ("bench", {"TRIALS": "100", "DURATION": "3600"}, "add CONFIRM=1"),
    ("bench", {"SCENARIO": "saas"}, "SCENARIO=saas cannot run with LOAD=wrk"),
    ("bench", {"LOAD": "locust", "SCENARIO": "db"}, "SCENARIO=db cannot run with LOAD=locust"),
    (
        "bench",
        {"SERVER": "uvicorn", "PROTOCOL": "h2c", "LOAD": "oha", "RATE": "9"},
        "SERVER=uvicorn cannot serve PROTOCOL=h2c (uvicorn: uvicorn's --http2 requires",
    ),
    (
        "bench",
        {"SERVER": "granian,waitress", "PROTOCOL": "https1"},
        "SERVER=waitress cannot serve PROTOCOL=https1 (waitress: no [protocols.https1]",
    ),
]
# Values a shell would run, through every target: each refused (its variable names a choice,
# a number or a label), and the sentinel never appears.
PAYLOADS = [
    "granian';touch {s};'",
    "$(touch {s})",
    "`touch {s}`",
    "x\ntouch {s}",
    "it's; touch {s}",
    '"; touch {s}; "',
]
TARGETS = [
    ("help", "SERVER"),
    ("setup", "SERVER"),
    ("images", "SERVER"),
    ("bench", "SERVER"),
    ("capacity", "SCENARIO"),
    ("serve", "PROXY"),
    ("overhead", "LOAD"),
    ("soak", "DURATION"),
    ("study", "NAME"),
    ("report", "MACHINE"),
    ("compare", "FORMAT"),
    ("export", "FORMAT"),
    ("test", "ARCH"),
    ("lint", "KEEPALIVE"),
    ("format", "RUNTIME"),
    ("lock", "NETWORK"),
    ("compose-up", "NGINX_PORT"),
    ("compose-bench", "SERVER"),
    ("compose-down", "TRIALS"),
    ("noise", "ROUNDS"),
    ("tune", "KNOBS"),
    ("remote", "HOST"),
]
INJECTIONS = [
    (target, {name: PAYLOADS[i % len(PAYLOADS)]}, "") for i, (target, name) in enumerate(TARGETS)
] + [
    (target, {"SERVER": payload}, "unknown SERVER")
    for target, payload in (
        ("bench", PAYLOADS[1]),
        ("bench", PAYLOADS[2]),
        ("bench", PAYLOADS[3]),
        ("bench", PAYLOADS[4]),
    )
]
CASES = UNKNOWN + EMPTY + VALUES + RULES + REQUIRED + FILES + PLANS + INJECTIONS


# What a make running this suite exports to its children: a user's shell has none of it.
OUTER_MAKE = ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES")


def _snapshot() -> set[str]:
    """What the harness's state holds at its top and in its runs (set-up and runs add there)."""
    state = ROOT / ".bench"
    entries = {p.name for p in state.iterdir()} if state.is_dir() else set()
    runs = state / "runs"
    return entries | ({f"runs/{p.name}" for p in runs.iterdir()} if runs.is_dir() else set())


def test_the_battery_is_at_least_60_cases_over_every_category() -> None:
    """The done-when of issue 29: 60 or more bad inputs, each category represented."""
    assert len(CASES) >= 60
    groups = (UNKNOWN, EMPTY, VALUES, RULES, REQUIRED, FILES, PLANS, INJECTIONS)
    assert all(groups)


@pytest.mark.parametrize(("target", "variables", "message"), CASES)
def test_bad_input_is_refused_before_setup_with_one_line(
    target: str, variables: dict[str, str], message: str, tmp_path: Path
) -> None:
    """Exit 2, one `bench:` line naming the problem, set-up never reached, nothing created;
    no payload runs."""
    sentinel = tmp_path / "pwned"
    assigned = {k: v.replace("{s}", str(sentinel)) for k, v in variables.items()}
    results = tmp_path / "results"
    if "RESULTS" not in assigned and target not in ("report", "export"):
        assigned["RESULTS"] = str(results)
    marker = tmp_path / "setup-ran"
    # the user's shell may hold make variables (NAME, ARCH): this test sets its own only; and
    # under `make test` the outer make's own (MAKELEVEL: "make[1]: ***" lines) are not a user's
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in BY_NAME and k not in assigned and k not in OUTER_MAKE
    }
    env |= {"PYWEBBENCH_SETUP_MARKER": str(marker)}
    before = _snapshot()
    result = subprocess.run(
        ["make", "-s", target, *(f"{k}={v}" for k, v in assigned.items())],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    said = [line for line in result.stderr.splitlines() if line.startswith("bench: ")]
    others = [line for line in result.stderr.splitlines() if not line.startswith("bench: ")]
    assert result.returncode == 2, result.stderr
    assert len(said) == 1 and message in said[0], result.stderr
    assert all(line.startswith("make: ***") for line in others), result.stderr
    assert not marker.exists(), "set-up started"
    assert not results.exists() and not sentinel.exists()
    assert _snapshot() == before


@pytest.mark.parametrize(("target", "name"), TARGETS)
def test_no_recipe_holds_a_value(target: str, name: str) -> None:
    """`make -n`: no recipe line of any target contains what the user gave (values reach the
    harness through the environment only)."""
    value = "zz-marker-of-a-value"
    recipe = subprocess.run(
        ["make", "-n", target, f"{name}={value}", f"PYTEST_ARGS={value}", "NGINX_PORT=65432"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    ).stdout
    assert value not in recipe and "65432" not in recipe, recipe


def _make_targets() -> list[str]:
    """Every target the Makefile declares (its TARGETS line), read from the Makefile."""
    for line in (ROOT / "Makefile").read_text().splitlines():
        if line.startswith("override TARGETS := "):
            return line.split(":=", 1)[1].split()
    raise AssertionError("the Makefile declares no TARGETS")


def _clean_env() -> dict[str, str]:
    """The environment without any make variable or an outer make's own."""
    return {k: v for k, v in os.environ.items() if k not in BY_NAME and k not in OUTER_MAKE}


@pytest.mark.parametrize("where", ["command line", "environment"])
@pytest.mark.parametrize("target", _make_targets())
def test_make_never_expands_a_value_of_any_variable(
    target: str, where: str, tmp_path: Path
) -> None:
    """Issue 58 item 1: every declared variable set to `$(shell touch ...)`, `${...}` and
    backtick forms at once, on make's command line or in its environment, through each target:
    nothing is touched (make expanded nothing), the refusal comes before set-up (exit 2)."""
    forms = ("$(shell touch {p})", "${{shell touch {p}}}", "`touch {p}`")
    values = {
        name: forms[i % len(forms)].format(p=tmp_path / f"touched-{name}")
        for i, name in enumerate(BY_NAME)
    }
    marker = tmp_path / "setup-ran"
    env = _clean_env() | {"PYWEBBENCH_SETUP_MARKER": str(marker)}
    argv = ["make", "-s", target, "XYZZY=1"]  # an unknown name: every target refuses it
    if where == "command line":
        argv += [f"{k}={v}" for k, v in values.items()]
    else:
        env |= values
    result = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stderr
    assert "XYZZY is not a variable" in result.stderr
    assert not marker.exists(), "set-up started"
    assert sorted(p.name for p in tmp_path.iterdir()) == [], "a value was run"


@pytest.mark.parametrize(
    "value", ["granian$(shell true)", "$(x)", "${HOME}", "`id`", "a$$b", "granian #1"]
)
def test_a_value_reaches_the_pre_check_as_typed(value: str) -> None:
    """The refusal quotes the text as typed: `$(x)` is not read as an empty value."""
    result = subprocess.run(
        ["make", "-s", "precheck", f"SERVER={value}"],
        cwd=ROOT,
        env=_clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert f"unknown SERVER {value!r}" in result.stderr, result.stderr


def test_an_unknown_target_names_the_targets_and_make_help() -> None:
    """make bnech: one line, exit 2, the valid targets and where to read about them."""
    result = subprocess.run(
        ["make", "-s", "bnech"], cwd=ROOT, env=_clean_env(), capture_output=True, text=True
    )
    said = [line for line in result.stderr.splitlines() if line.startswith("bench: ")]
    assert result.returncode == 2
    assert len(said) == 1 and "unknown target 'bnech'" in said[0] and "make help" in said[0]
    assert "bench" in said[0].split("valid:")[1].split()
