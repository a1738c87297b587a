# Every target is a verb; every variable below is a contract users and scripts rely on.
# Defaults live in bench/core/defaults.py so `python -m bench` and make agree; the variables are
# declared once, with their parsers and rules, in bench/core/variables.py. `make help` states
# them (tests/bench/test_defaults.py holds it to them).
.DEFAULT_GOAL := help
# Values are data: make never expands a value it did not write. A variable given on make's
# command line is a recursive variable whose text make would expand (running `$(shell ...)`)
# when it exports it to a recipe; each is redefined here as a simple variable holding its text
# as typed ($(value): no expansion), still exported. The environment's values reach recipes
# as they are; the three copies below take their text with $(value), never $(VAR).
override PYWEBBENCH_CMDLINE := $(strip $(foreach v,$(.VARIABLES),$(if $(filter command line,$(origin $(v))),$(v))))
export PYWEBBENCH_CMDLINE
# The targets asked for (make alone: help), so the pre-check refuses a variable none of them
# takes (make bench HOST=...). The goals' text as typed: := expands the reference only.
export PYWEBBENCH_GOALS := $(or $(MAKECMDGOALS),help)
$(foreach v,$(PYWEBBENCH_CMDLINE),$(eval export override $(v) := $$(value $(v))))
# MACHINE=: the user's name for this machine in records and the summary (bench/host/metadata.py)
export PYWEBBENCH_MACHINE := $(value MACHINE)
# REFERENCE=1: merge the shipped reference run (results/reference/) into your summary
export PYWEBBENCH_REFERENCE := $(value REFERENCE)
# PRICE=amd64:0.0416,arm64:0.0336: req/s per dollar-hour where the summary compares machines
export PYWEBBENCH_PRICE := $(value PRICE)
# `override` after the command line's: what the Makefile itself uses is never taken from it.
override SHELL := /bin/bash
override PY := .bench/venv/bin/python

# No value ever reaches a shell as text: make exports the variables of its command line to the
# environment of every recipe, and the harness reads them there (`python -m bench <command>
# --from-env`); a recipe never splices $(VAR). The names given on the command line go to the
# pre-check, which refuses an unknown or misspelled one (SERVERS=, server=) and an empty one.
# PYTHON= (the interpreter build) is a make variable only when given on make's command line:
# a PYTHON the shell exports (node-gyp and others keep a path there) never reaches the harness.
ifeq ($(origin PYTHON),environment)
unexport PYTHON
endif

override TARGETS := precheck images help setup bench remote capacity serve overhead noise tune soak study report reference compare export test lint format lock compose-up compose-bench compose-down
.PHONY: $(TARGETS)

# An unknown target (make bnech): one line naming the targets, exit 2, as for a bad value.
.DEFAULT:
	@echo "bench: unknown target '$@'; valid: $(filter-out precheck setup,$(TARGETS)) (make help says what each does)" >&2; exit 2

help: precheck ## list targets, variables, scenarios, studies and servers
	@echo "Targets:"
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/' | awk -F'\t' '{printf "  %-14s %s\n", $$1, $$2}'
	@echo
	@# Variables, scenarios, studies and servers come from their declarations (python -m bench help).
	@if [ -x $(PY) ]; then $(PY) -m bench help; \
	else echo "Variables, scenarios, studies and servers: run make setup, then make help"; fi

# Bad input is refused before anything is installed: each command's variables checked with the
# system's python3 (standard library only, bench/precheck.py), then setup. A target that runs
# no harness command checks its command line all the same (CHECK none).
override CHECK := none
bench: override CHECK := run
compose-bench: override CHECK := run
capacity: override CHECK := capacity
serve: override CHECK := serve
overhead: override CHECK := overhead
noise: override CHECK := noise
tune: override CHECK := tune
study: override CHECK := study
compare: override CHECK := compare
soak: override CHECK := soak
report: override CHECK := report
reference: override CHECK := reference
export: override CHECK := export
images: override CHECK := images
remote: override CHECK := remote

precheck:
	@bash bench/require-python.sh
	@if command -v python3 >/dev/null; then python3 -m bench.precheck $(CHECK); fi

# PYWEBBENCH_SETUP_MARKER (the environment, for tests): a file touched when set-up starts, so
# that a test proves a refusal came before it.
setup: precheck ## install what is missing: distro packages, uv, the harness venv
	@if [ -n "$${PYWEBBENCH_SETUP_MARKER:-}" ]; then : > "$$PYWEBBENCH_SETUP_MARKER"; fi
	@bash bench/setup.sh

images: export IMAGES := 1
images: setup ## build the base image (debootstrap) and one image per server (SERVER, ARCH)
	$(PY) -m bench images --from-env

bench: setup ## start the stack, verify, measure, write records and summary.md
	$(PY) -m bench run --from-env

# HOST is probed by the pre-check (ssh without a prompt) before set-up installs anything here.
remote: setup ## make bench on HOST=user@host over ssh (make bench's variables); its records come back into RESULTS
	$(PY) -m bench remote --from-env

capacity: export OHA := 1
capacity: setup ## each server's highest rate with p99 <= SLO_P99_MS (open loop, oha; LOAD=wsload: WebSocket messages/s)
	$(PY) -m bench capacity --from-env

serve: setup ## stack + one verified server up for your tools until Ctrl-C; prints the URLs
	$(PY) -m bench serve --from-env

overhead: setup ## harness req/s vs bare wrk, alternated (SERVER SCENARIO CONCURRENCY DURATION ROUNDS LEGACY)
	$(PY) -m bench overhead --from-env

noise: setup ## this machine's noise: one server in ROUNDS x STARTS x RUNS, variance components, the A/A race
	$(PY) -m bench noise --from-env

tune: setup ## race each server's knobs at one point (SERVER SCENARIO CONCURRENCY KNOBS OBJECTIVE BUDGET); make bench then uses the best
	$(PY) -m bench tune --from-env

# Open-loop study arms and the load-balancer studies (namespace = true in studies/) drive oha.
study: export OHA := 1
study: setup ## re-run a source document's experiment (NAME=<study>|all; DURATION, RESULTS, TRIALS=auto BUDGET MARGIN apply)
	$(PY) -m bench study --from-env

compare: setup ## two result sets side by side: BASE=<dir> HEAD=<dir>, ratios with intervals; FAIL_BELOW=0.97 (req/s), FAIL_ABOVE=1.10 (p99): fails on a regression
	@$(PY) -m bench compare --from-env

soak: export OHA := 1
soak: setup ## memory of every server process over a long fixed-rate run (DURATION=600 RATE=100 SOAK_INTERVAL=5)
	$(PY) -m bench soak --from-env

report: setup ## rebuild summary.md from the records in RESULTS
	$(PY) -m bench report --from-env

# The questions and their variables are declared in reference.toml, checked by the pre-check;
# its capacity and study questions drive oha (built by set-up, but not for DRY_RUN=1: a plan),
# and its end takes docs/report.png with chromium (installed by set-up, likewise); a study
# whose arms run in containers (container-limits) has its missing images built first
# (debootstrap, likewise; bench/cli/campaign.py image_builds).
reference: export OHA := $(if $(filter 1 on,$(value DRY_RUN)),0,1)
reference: export IMAGES := $(if $(filter 1 on,$(value DRY_RUN)),0,1)
reference: export PYWEBBENCH_PICTURE := $(if $(filter 1 on,$(value DRY_RUN)),0,1)
reference: setup ## regenerate results/reference: the campaign of reference.toml, resumable (DRY_RUN=1: the plan)
	$(PY) -m bench reference --from-env

# FORMAT is checked by python -m bench before anything else; the data goes to stdout.
export: setup ## every point of RESULTS as one row: FORMAT=csv|json on stdout (docs/export.md)
	@$(PY) -m bench export --from-env

test: precheck ## run the test suite (unit + integration on the real stack, the emulated arm64 path too)
	@if [ -n "$${PYWEBBENCH_SETUP_MARKER:-}" ]; then : > "$$PYWEBBENCH_SETUP_MARKER"; fi
	@PYWEBBENCH_TEST=1 bash bench/setup.sh
	@# PYTEST_ARGS split into words by bash's read (no expansion, no evaluation)
	@read -ra args <<< "$${PYTEST_ARGS:-}"; $(PY) -m pytest "$${args[@]}"

lint: setup ## ruff check and format check
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

format: setup ## apply ruff format and safe fixes
	$(PY) -m ruff format .
	$(PY) -m ruff check --fix .

lock: setup ## re-pin every requirements.txt (bench/, locust/, wsload/, servers/*/) from its .in
	@for dir in bench/ locust/ wsload/ servers/*/; do \
	  [ -f "$$dir/requirements.in" ] || continue; \
	  echo "pinning $$dir"; \
	  (cd "$$dir" && $$(cat $(CURDIR)/.bench/uv-path) pip compile -q --universal --python-version 3.11 \
	    --no-header requirements.in -o requirements.txt) || exit 1; \
	done
	@# PYTHON=<minor>t and <minor> share one pin file per server (requirements-<minor>.txt),
	@# resolved on the built <minor>t with wheels only (its free-threaded wheels decide;
	@# bench/python-build.sh <minor>t builds it).
	@for src in servers/*/requirements-3.*.in; do \
	  [ -f "$$src" ] || continue; \
	  dir=$$(dirname "$$src"); minor=$$(basename "$$src" .in); minor=$${minor#requirements-}; \
	  py=$(CURDIR)/.bench/tools/python/$${minor}t/bin/python3; \
	  [ -x "$$py" ] || { echo "lock: $$dir/requirements-$$minor.txt kept (build $${minor}t first: bash bench/python-build.sh $${minor}t)"; continue; }; \
	  echo "pinning $$dir ($${minor}t)"; \
	  (cd "$$dir" && $$(cat $(CURDIR)/.bench/uv-path) pip compile -q --python "$$py" --only-binary :all: \
	    --no-header requirements-$$minor.in -o requirements-$$minor.txt) || exit 1; \
	done

# -- the container path (compose/): needs a Docker engine; native runs need none ----------------
COMPOSE ?= $(shell docker compose version >/dev/null 2>&1 && echo "docker compose" || echo docker-compose)
COMPOSE_RUN = $(COMPOSE) -p pywebbench -f compose/compose.yaml
COMPOSE_PASSWORD = .bench/compose-db-password

# The base's tag (bench/host/images.py): the stack image is built FROM it.
COMPOSE_BASE = $$($(PY) -c "from bench.host.images import host_base_tag; print(host_base_tag())")
# docker-compose v1 builds with the engine's legacy builder (this engine has no buildx).
COMPOSE_ENV = DOCKER_BUILDKIT=0 COMPOSE_DOCKER_CLI_BUILD=0 BASE=$(COMPOSE_BASE)

compose-up: images ## build what is missing and start the stack in containers (SERVER, WORKERS, THREADS, CONNECTIONS)
	@test -s $(COMPOSE_PASSWORD) || $(PY) -c "import secrets; print(secrets.token_urlsafe(18))" > $(COMPOSE_PASSWORD)
	$(COMPOSE_ENV) DB_PASSWORD=$$(cat $(COMPOSE_PASSWORD)) SERVER="$${SERVER:-granian}" $(COMPOSE_RUN) up -d --build
	@port="$${NGINX_PORT:-8080}"; echo "waiting for nginx on 127.0.0.1:$$port"; for i in $$(seq 1 120); do \
	  curl -fsS "http://127.0.0.1:$$port/health" >/dev/null 2>&1 && exit 0; sleep 1; done; \
	  echo "the stack did not come up: $(COMPOSE_RUN) logs" >&2; exit 1

compose-bench: precheck compose-up ## measure the containers through their nginx with wrk (records: metadata.runtime compose)
	$(PY) -m bench run --from-env --target="http://127.0.0.1:$${NGINX_PORT:-8080}" --runtime=compose

compose-down: precheck ## stop and remove the containers
	BASE=unused DB_PASSWORD=unused $(COMPOSE_RUN) down -v --remove-orphans
