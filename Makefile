# Every target is a verb; every variable below is a contract users and scripts rely on.
# Defaults live in bench/cli.py so `python -m bench` and make agree; unset variables are not passed.
.DEFAULT_GOAL := help
SHELL := /bin/bash
PY := .bench/venv/bin/python

# name: make variable -> CLI option (only passed when set)
opt = $(if $($(1)),--$(2)='$($(1))')
BENCH_OPTS = $(call opt,SERVER,server) $(call opt,SCENARIO,scenario) \
  $(call opt,CONCURRENCY,concurrency) $(call opt,DURATION,duration) $(call opt,TRIALS,trials) \
  $(call opt,ARCH,arch) $(call opt,RESULTS,results) $(call opt,WORKERS,workers) \
  $(call opt,THREADS,threads) $(call opt,CONNECTIONS,connections) $(call opt,BACKLOG,backlog) \
  $(call opt,WARMUP,warmup) \
  $(call opt,LOAD_THREADS,load-threads) $(call opt,SEED,seed)

.PHONY: help setup bench report test lint format lock

help: ## list targets and variables
	@echo "Targets:"
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/' | awk -F'\t' '{printf "  %-8s %s\n", $$1, $$2}'
	@echo
	@echo "Variables (make bench VAR=value ...):"
	@echo "  SERVER       server id, comma list, or all           (default: granian)"
	@echo "  SCENARIO     comma list of: plaintext json db queries fortunes updates upstream compute"
	@echo "                                                        (default: plaintext,json,db)"
	@echo "  CONCURRENCY  comma list of open connections           (default: 5,10,30,50,100)"
	@echo "  DURATION     seconds per measured run                 (default: 10)"
	@echo "  WARMUP       seconds of warmup before each measurement (default: 2)"
	@echo "  TRIALS       measured trials per server/scenario/conc.  (default: 3)"
	@echo "  ARCH         amd64 or arm64                          (default: this host's)"
	@echo "  RESULTS      directory for records and summary.md    (default: results)"
	@echo "  WORKERS THREADS CONNECTIONS BACKLOG  override a server's knob where it has it (default: server.toml)"
	@echo "  LOAD_THREADS wrk threads                             (default: half the CPUs, at least 1)"
	@echo "  SEED         seed for the random server order        (default: random)"
	@echo "Servers: $$(ls servers | tr '\n' ' ')"

setup: ## install what is missing: distro packages, uv, the harness venv
	@bash bench/setup.sh

bench: setup ## start the stack, verify, measure, write records and summary.md
	$(PY) -m bench run $(BENCH_OPTS)

report: setup ## rebuild summary.md from the records in RESULTS
	$(PY) -m bench report $(call opt,RESULTS,results)

test: setup ## run the test suite (unit + integration on the real stack)
	$(PY) -m pytest $(PYTEST_ARGS)

lint: setup ## ruff check and format check
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

format: setup ## apply ruff format and safe fixes
	$(PY) -m ruff format .
	$(PY) -m ruff check --fix .

lock: setup ## re-pin servers/*/requirements.txt from their requirements.in (uv pip compile)
	@for dir in servers/*/; do \
	  [ -f "$$dir/requirements.in" ] || continue; \
	  echo "pinning $$dir"; \
	  (cd "$$dir" && $$(cat ../../.bench/uv-path) pip compile -q --universal --python-version 3.11 \
	    --no-header requirements.in -o requirements.txt) || exit 1; \
	done
