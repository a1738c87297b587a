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
from bench.core.variables import BY_NAME, MAKE_TARGETS, target_takes

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
# One wording for a value set but empty (issue 58 item 7: it was "unknown SERVER ''" here,
# "RESULTS= is set but empty" there), with the valid values where there is a list of them.
EMPTY = [
    ("bench", {"SERVER": ""}, "SERVER= is set but empty; unset it or give a value; valid: daphne"),
    ("bench", {"DURATION": ""}, "DURATION= is set but empty; unset it or give a value (1..86400)"),
    ("study", {"NAME": ""}, "NAME= is set but empty; unset it or give a value; valid: accept-q"),
    ("bench", {"RESULTS": ""}, "RESULTS= is set but empty"),
    ("images", {"ARCH": ""}, "ARCH= is set but empty; unset it or give a value; valid: aarch64"),
    ("bench", {"PROTOCOL": " "}, "PROTOCOL= is set but empty; unset it or give a value; valid:"),
    ("compare", {**COMPARED, "FAIL_BELOW": ""}, "FAIL_BELOW= is set but empty"),
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
    ("compare", {"BASE": "/nonexistent", "HEAD": "results/reference"}, "holds no records"),
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
# Issue 58 item 2: every count carries its bound, whichever variable carries it (KNOBS: the
# bound of the variable that sets the knob; <k>*cpus evaluated; values and configurations
# capped).
BOUNDS = [
    ("tune", {"KNOBS": "workers=99999"}, "KNOBS: workers=99999 is out of range 1..256"),
    ("tune", {"KNOBS": "threads=2000"}, "KNOBS: threads=2000 is out of range 1..1024"),
    ("tune", {"KNOBS": "workers=1000*cpus"}, "k of <k>*cpus is 1..16 (k=1000)"),
    ("tune", {"KNOBS": "workers=0*cpus"}, "k of <k>*cpus is 1..16 (k=0)"),
    (
        "tune",
        {"KNOBS": "workers=" + ",".join(map(str, range(1, 3001)))},
        "workers has 3000 values; at most 32 per knob",
    ),
    (
        "tune",
        {
            "KNOBS": "workers=1,2,3,4,5,6 threads="
            + ",".join(map(str, range(1, 30)))
            + " backlog=1,2,3,4,5,6,7,8"
        },
        "= 1392 configurations; at most 1024",
    ),
    ("tune", {"KNOBS": "timeout=999999"}, "KNOBS: timeout=999999 is out of range 1..86400"),
]
# Issue 58 item 3: a result set is never a system directory, nor (for a command that writes
# records) the checkout's shipped reference; reading the reference stays allowed.
DIRECTORIES = [
    ("bench", {"RESULTS": "/"}, "RESULTS='/' is a system directory (/), never a result set"),
    ("report", {"RESULTS": "/"}, "RESULTS='/' is a system directory (/)"),
    ("export", {"FORMAT": "csv", "RESULTS": "/"}, "RESULTS='/' is a system directory (/)"),
    ("bench", {"RESULTS": "/etc"}, "RESULTS='/etc' is a system directory (/etc)"),
    ("capacity", {"RESULTS": "/usr/local/x"}, "is a system directory (in /usr)"),
    ("study", {"NAME": "accept-queue", "RESULTS": "/var"}, "is a system directory (/var)"),
    ("noise", {"RESULTS": "/home"}, "RESULTS='/home' is a system directory (/home)"),
    ("tune", {"RESULTS": "/tmp"}, "RESULTS='/tmp' is a system directory (/tmp)"),
    ("soak", {"RESULTS": "/root"}, "RESULTS='/root' is a system directory (/root)"),
    ("bench", {"RESULTS": "/boot"}, "is a system directory (/boot)"),
    ("compare", {"BASE": "/", "HEAD": "results/reference"}, "BASE='/' is a system directory"),
    ("compare", {"BASE": "results/reference", "HEAD": "/usr"}, "HEAD='/usr' is a system"),
    ("bench", {"RESULTS": "results/reference"}, "is the checkout's shipped reference"),
    (
        "study",
        {"NAME": "accept-queue", "RESULTS": "results/reference/records"},
        "is the checkout's shipped reference (results/reference)",
    ),
    ("tune", {"RESULTS": "results/reference/x"}, "is the checkout's shipped reference"),
    ("noise", {"RESULTS": "results/reference"}, "is the checkout's shipped reference"),
    ("remote", {"HOST": "a@b", "RESULTS": "results/reference"}, "shipped reference"),
]
# Issue 58 item 5: a variable on make's command line that the target does not take is
# refused with the targets that do (the environment's are not: a shell may hold NAME=).
DROPPED = [
    ("bench", {"HOST": "a@b"}, "HOST: not with make bench; it applies to make remote"),
    ("bench", {"KNOBS": "workers=1,2"}, "KNOBS: not with make bench; it applies to make tune"),
    ("bench", {"ROUNDS": "3"}, "ROUNDS: not with make bench; it applies to make overhead, noise"),
    ("bench", {"NAME": "reload"}, "NAME: not with make bench; it applies to make study"),
    ("serve", {"TRIALS": "auto"}, "TRIALS: not with make serve; it applies to make bench"),
    ("test", {"SERVER": "granian"}, "SERVER: not with make test; it applies to make bench"),
    ("lint", {"DURATION": "5"}, "DURATION: not with make lint; it applies to make bench"),
    ("help", {"SERVER": "granian"}, "SERVER: not with make help"),
    ("compose-down", {"NGINX_PORT": "9"}, "NGINX_PORT: not with make compose-down"),
    ("report", {"SERVER": "granian"}, "SERVER: not with make report"),
    ("export", {"FORMAT": "csv", "DURATION": "5"}, "DURATION: not with make export"),
    ("images", {"DURATION": "5"}, "DURATION: not with make images"),
    ("compare", {"BASE": "a", "HEAD": "b", "FORMAT": "csv"}, "FORMAT: not with make compare"),
    ("remote", {"HOST": "a@b", "NAME": "reload"}, "NAME: not with make remote"),
    ("capacity", {"KNOBS": "workers=1"}, "KNOBS: not with make capacity"),
    ("serve", {"DURATION": "5"}, "DURATION: not with make serve; it applies to make bench"),
    ("study", {"NAME": "reload", "BUDGET": "5"}, "BUDGET: NAME=reload has no tuned arm"),
    ("bench", {"MESSAGE_BYTES": "100"}, "MESSAGE_BYTES: no WebSocket scenario in SCENARIO=plain"),
    ("bench", {"MESSAGE_RATE": "10", "SCENARIO": "db"}, "MESSAGE_RATE: no WebSocket scenario"),
]
# Issue 58 item 4: a plan over 24 h needs CONFIRM=1 for every measuring command.
PLAN_SIZE = [
    (
        "noise",
        {"ROUNDS": "100", "STARTS": "20", "RUNS": "50", "DURATION": "86400"},
        "this plan is about 100,002.3 days of load (more than 24 h): add CONFIRM=1",
    ),
    ("capacity", {"SERVER": "all", "CAPACITY_BUDGET": "86400"}, "days of load (more than 24 h)"),
    ("capacity", {"TRIALS": "100", "CAPACITY_BUDGET": "3000"}, "fewer SERVER/SCENARIO/TRIALS"),
    ("study", {"NAME": "all", "TRIALS": "100", "DURATION": "3600"}, "fewer NAME/TRIALS/DURATION"),
    ("tune", {"SERVER": "gunicorn-sync,gunicorn-gthread", "BUDGET": "1000"}, "33.3 h of load"),
    ("soak", {"DURATION": "86400", "WARMUP": "600", "SOAK_INTERVAL": "60"}, "add CONFIRM=1"),
    ("remote", {"HOST": "a@b", "TRIALS": "100", "DURATION": "3600"}, "add CONFIRM=1"),
]
# Issue 58 item 6: what needs only the command line, the declarations, the files named and
# the host's arch is refused before set-up ({tmp}: files the test writes, _bad_files).
EARLY = [
    ("bench", {"APP": "{tmp}/app/broken.py:app"}, "broken.py does not compile: "),
    ("bench", {"APP": "{tmp}/app/nocall.py:app"}, "nocall.py binds no 'app' at its top level"),
    (
        "bench",
        {"SERVER": "granian,gunicorn-sync", "SCENARIO": "websocket"},
        "no server of SERVER=granian,gunicorn-sync speaks websocket (SCENARIO=websocket)",
    ),
    (
        "capacity",
        {"SERVER": "uwsgi", "SCENARIO": "websocket", "LOAD": "wsload", "CONCURRENCY": "10"},
        "no server of SERVER=uwsgi speaks websocket",
    ),
    ("bench", {"PYTHON": "3.14t", "ARCH": "arm64"}, "PYTHON=3.14t is built for this host's arch"),
    ("report", {"RESULTS": "{tmp}/truncated"}, "holds no readable record: 1 file(s) skipped"),
    ("report", {"RESULTS": "{tmp}/empty"}, "holds no readable record: 1 file(s) skipped"),
    ("export", {"FORMAT": "csv", "RESULTS": "{tmp}/empty"}, "holds no readable record"),
    ("export", {"FORMAT": "json", "RESULTS": "{tmp}/truncated"}, "holds no readable record"),
    (
        "compare",
        {"BASE": "{tmp}/truncated", "HEAD": "results/reference"},
        "BASE='{tmp}/truncated' holds no readable record",
    ),
    ("compare", {"BASE": "results/reference", "HEAD": "{tmp}/empty"}, "HEAD='{tmp}/empty' holds"),
]
# Issue 58 item 7: one case rule (exact, with the value meant), SEED's real maximum, make
# serve's protocols without a load tool's rule, IPv6 hosts reach ssh without brackets.
SMALLER = [
    ("bench", {"PROTOCOL": "H2C"}, "unknown PROTOCOL 'H2C'; did you mean h2c? valid: http1"),
    ("bench", {"SCENARIO": "DB"}, "unknown SCENARIO 'DB'; did you mean db? valid: plaintext"),
    ("bench", {"SERVER": "Granian"}, "unknown SERVER 'Granian'; did you mean granian?"),
    ("bench", {"PROXY": "NGINX"}, "unknown PROXY 'NGINX'; did you mean nginx? valid: none"),
    ("images", {"ARCH": "AMD64"}, "unknown ARCH 'AMD64'; did you mean amd64?"),
    ("export", {"FORMAT": "CSV"}, "unknown FORMAT 'CSV'; did you mean csv? valid: csv, json"),
    ("bench", {"KEEPALIVE": "ON"}, "KEEPALIVE='ON' is not a switch; did you mean on? valid: on"),
    ("bench", {"SEED": "2147483648"}, "SEED=2147483648 is out of range 0..2147483647"),
    ("serve", {"SERVER": "uvicorn", "PROTOCOL": "h2c"}, "SERVER=uvicorn cannot serve PROTOCOL=h2c"),
    ("remote", {"HOST": "nobody@[::1]"}, "ssh cannot reach nobody@[::1] without a prompt"),
]
CASES = UNKNOWN + EMPTY + VALUES + RULES + REQUIRED + FILES + PLANS + INJECTIONS + BOUNDS
CASES += DIRECTORIES + DROPPED + PLAN_SIZE + EARLY + SMALLER


# What a make running this suite exports to its children: a user's shell has none of it.
OUTER_MAKE = ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES")


def _snapshot() -> set[str]:
    """What the harness's state holds at its top and in its runs (set-up and runs add there)."""
    state = ROOT / ".bench"
    entries = {p.name for p in state.iterdir()} if state.is_dir() else set()
    runs = state / "runs"
    return entries | ({f"runs/{p.name}" for p in runs.iterdir()} if runs.is_dir() else set())


def _created(before: set[str], after: set[str]) -> set[str]:
    """What appeared in the harness's state, but runs of a harness still running (another
    checkout sharing this .bench: runs/<time>-<pid> of a live pid; a refused make starts no
    harness, and one it started would be gone when make returns)."""

    def alive(entry: str) -> bool:
        pid = entry.rpartition("-")[2]
        return entry.startswith("runs/") and pid.isdigit() and Path(f"/proc/{pid}").exists()

    return {entry for entry in after - before if not alive(entry)}


def test_the_battery_is_at_least_60_cases_over_every_category() -> None:
    """The done-when of issue 29: 60 or more bad inputs, each category represented."""
    assert len(CASES) >= 60
    groups = (
        UNKNOWN,
        EMPTY,
        VALUES,
        RULES,
        REQUIRED,
        FILES,
        PLANS,
        INJECTIONS,
        BOUNDS,
        DIRECTORIES,
    )
    assert all(groups)


def _bad_files(tmp: Path) -> None:
    """The files EARLY's cases name: an app that does not compile, one without its callable,
    a result set with a truncated record, one with an empty record."""
    (tmp / "app").mkdir()
    (tmp / "app" / "broken.py").write_text("def app(:\n    pass\n")
    (tmp / "app" / "nocall.py").write_text("application = None\n")
    record = next((ROOT / "results" / "reference" / "records").glob("*.json")).read_text()
    for name, text in (("truncated", record[:100]), ("empty", "")):
        (tmp / name / "records").mkdir(parents=True)
        (tmp / name / "records" / "r.json").write_text(text)


@pytest.mark.parametrize(("target", "variables", "message"), CASES)
def test_bad_input_is_refused_before_setup_with_one_line(
    target: str, variables: dict[str, str], message: str, tmp_path: Path
) -> None:
    """Exit 2, one `bench:` line naming the problem, set-up never reached, nothing created;
    no payload runs."""
    sentinel = tmp_path / "pwned"
    assigned = {
        k: v.replace("{s}", str(sentinel)).replace("{tmp}", str(tmp_path))
        for k, v in variables.items()
    }
    message = message.replace("{tmp}", str(tmp_path))
    if any("{tmp}" in v for v in variables.values()):
        _bad_files(tmp_path)
    results = tmp_path / "results"
    # RESULTS into the temporary directory where the target takes it (another would refuse
    # it: issue 58 item 5), never the report's (it must exist)
    takes = target not in MAKE_TARGETS or "RESULTS" in target_takes(target)
    if "RESULTS" not in assigned and target not in ("report", "export") and takes:
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
    assert not _created(before, _snapshot())


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
