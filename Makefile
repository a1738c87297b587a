# Every target is a verb; every variable below is a contract users and scripts rely on.
# Defaults live in bench/core/defaults.py so `python -m bench` and make agree; unset variables are not
# passed. `make help` states them (tests/bench/test_defaults.py holds it to them).
.DEFAULT_GOAL := help
SHELL := /bin/bash
PY := .bench/venv/bin/python
# MACHINE=: the user's name for this machine in records and the summary (bench/host/metadata.py)
export PYWEBBENCH_MACHINE = $(MACHINE)
# REFERENCE=1: merge the shipped reference run (results/reference/) into your summary
export PYWEBBENCH_REFERENCE = $(REFERENCE)

# name: make variable -> CLI option (only passed when set)
opt = $(if $($(1)),--$(2)='$($(1))')
BENCH_OPTS = $(call opt,SERVER,server) $(call opt,SCENARIO,scenario) \
  $(call opt,CONCURRENCY,concurrency) $(call opt,DURATION,duration) $(call opt,TRIALS,trials) \
  $(call opt,ARCH,arch) $(call opt,RESULTS,results) $(call opt,WORKERS,workers) \
  $(call opt,THREADS,threads) $(call opt,CONNECTIONS,connections) $(call opt,BACKLOG,backlog) \
  $(call opt,WARMUP,warmup) \
  $(call opt,LOAD_THREADS,load-threads) $(call opt,SEED,seed) \
  $(call opt,PROXY,proxy) $(call opt,KEEPALIVE,keepalive) \
  $(call opt,UPSTREAM_KEEPALIVE,upstream-keepalive) $(call opt,PROXY_TIMEOUT,proxy-timeout) \
  $(call opt,PIN,pin) $(call opt,LOAD,load) $(call opt,LOCUST_WORKERS,locust-workers) \
  $(call opt,TARGET,target) $(call opt,RATE,rate) $(call opt,CPU_QUOTA,cpu-quota) \
  $(call opt,LIFECYCLE,lifecycle) $(call opt,RECYCLE,recycle) $(APP_OPTS)
# APP=: the user's own WSGI/ASGI app (bench/core/app.py) instead of app_common
APP_OPTS = $(call opt,APP,app) $(call opt,APP_ROUTES,app-routes) \
  $(call opt,APP_REQUIREMENTS,app-requirements) $(call opt,APP_KIND,app-kind)
# make serve: what starts a server (no load, no results)
SERVE_OPTS = $(call opt,SERVER,server) $(call opt,ARCH,arch) $(call opt,WORKERS,workers) \
  $(call opt,THREADS,threads) $(call opt,CONNECTIONS,connections) $(call opt,BACKLOG,backlog) \
  $(call opt,PROXY,proxy) $(call opt,KEEPALIVE,keepalive) \
  $(call opt,UPSTREAM_KEEPALIVE,upstream-keepalive) $(call opt,PROXY_TIMEOUT,proxy-timeout) \
  $(call opt,PIN,pin) $(APP_OPTS)

.PHONY: help setup bench capacity serve overhead soak study report compare test lint format lock compose-up compose-bench compose-down

help: ## list targets and variables
	@echo "Targets:"
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/' | awk -F'\t' '{printf "  %-14s %s\n", $$1, $$2}'
	@echo
	@echo "Variables (make bench VAR=value ...):"
	@echo "  SERVER       server id, comma list, or all           (default: granian)"
	@echo "  SCENARIO     comma list of: plaintext json db queries fortunes updates upstream compute"
	@echo "                                                        (default: plaintext,json,db)"
	@echo "  CONCURRENCY  comma list of open connections           (default: 5,10,30,50,100)"
	@echo "               with LOAD=oha: the connection pool the rate is sent from (default: per rate)"
	@echo "  DURATION     seconds per measured run                 (default: 10)"
	@echo "  WARMUP       seconds of warmup before each measurement (default: 2)"
	@echo "  TRIALS       measured trials per server/scenario/conc.  (default: 5)"
	@echo "  ARCH         amd64 or arm64                          (default: this host's)"
	@echo "  RESULTS      directory for records and summary.md    (default: results)"
	@echo "  WORKERS THREADS CONNECTIONS BACKLOG  override a server's knob where it has it (default: server.toml)"
	@echo "  LOAD_THREADS wrk threads                             (default: half the CPUs, at least 1)"
	@echo "  SEED         seed for the random server order        (default: random)"
	@echo "  PROXY        none, nginx (nginx from proxy/ in front of the server) or alb (nginx as a cloud balancer: 60 s upstream idle timeout, no retry) (default: none)"
	@echo "  KEEPALIVE    on or off: client keep-alive, and nginx's upstream keep-alive (default: on)"
	@echo "  UPSTREAM_KEEPALIVE  on or off: nginx -> server keep-alive alone (default: KEEPALIVE)"
	@echo "  PROXY_TIMEOUT  nginx's connect/read timeout in seconds (default: 60, nginx's own)"
	@echo "  PIN          1: load tool and server on separate CPUs   (default: 0)"
	@echo "  LOAD         wrk, locust (runs SCENARIO=saas) or oha (open loop: RATE=) (default: wrk)"
	@echo "  RATE         LOAD=oha: comma list of offered requests/s, sent whatever the server does"
	@echo "  LOCUST_WORKERS  Locust worker processes (0: one local process) (default: 0)"
	@echo "  TARGET       http://host:port of a server running elsewhere: only the load runs here"
	@echo "  FORMAT       make export: csv or json (one row per point, on stdout)"
	@echo "  BASE HEAD    make compare: the two results directories (HEAD/BASE ratios)"
	@echo "  REFERENCE    1: merge the shipped reference (results/reference/) into your summary (default: 0)"
	@echo "  MACHINE      a label for this machine in records and summaries (default: hostname + identity)"
	@echo "  CPU_QUOTA    CPUs the server may use (any fraction), a cgroup quota as containers set it, needs root (default: none)"
	@echo "  SOAK_INTERVAL  make soak: seconds between RSS samples (default: 5; DURATION 600, RATE 100, SCENARIO db)"
	@echo "  RECYCLE      requests per worker before the server's own recycling replaces it (default: none)"
	@echo "  LIFECYCLE    reload: each server's own graceful reload mid-window (needs LOAD=oha RATE=) (default: none)"
	@echo "  SLO_P99_MS   make capacity: the p99 objective in ms (default: 100)"
	@echo "  SLO_P999_MS  make capacity: a p99.9 objective in ms too (default: none)"
	@echo "  CAPACITY_BUDGET  make capacity: seconds per server and scenario (default: 300)"
	@echo "               (RATE's first value starts the search: default 50; DURATION 5, WARMUP 1)"
	@echo "  APP          your own app: <path or module>:<callable>, or a WSGI and an ASGI entry, comma-separated"
	@echo "  APP_ROUTES   APP: TOML list of [[route]] (name, method, path, status, body, weight) (default: routes.toml beside the app)"
	@echo "  APP_REQUIREMENTS  APP: pinned requirements layered on each server's (default: requirements.txt beside the app)"
	@echo "  APP_KIND     APP: wsgi or asgi per entry, where it cannot be detected (default: detected)"
	@echo "  make serve   takes SERVER (one id), PROXY, KEEPALIVE, UPSTREAM_KEEPALIVE, PROXY_TIMEOUT,"
	@echo "               WORKERS THREADS CONNECTIONS BACKLOG, PIN, ARCH, APP and its companions"
	@echo "  ROUNDS       make overhead: rounds of bare wrk vs the harness per server and route (default: 8)"
	@echo "  LEGACY       make overhead: 1 adds the observer as it was before it was made cheap (default: 0)"
	@echo "  NAME         make study: $$(ls studies studies/lb | grep toml | sed 's/.toml//' | tr '\n' ' ')all"
	@echo "Servers: $$(ls servers | tr '\n' ' ')"

setup: ## install what is missing: distro packages, uv, the harness venv
	@bash bench/setup.sh

bench: setup ## start the stack, verify, measure, write records and summary.md
	$(PY) -m bench run $(BENCH_OPTS)

capacity: export OHA := 1
capacity: setup ## each server's highest rate with p99 <= SLO_P99_MS (open loop, oha)
	$(PY) -m bench capacity $(BENCH_OPTS) $(call opt,SLO_P99_MS,slo-p99-ms) \
	  $(call opt,SLO_P999_MS,slo-p999-ms) $(call opt,CAPACITY_BUDGET,budget)

serve: setup ## stack + one verified server up for your tools until Ctrl-C; prints the URLs
	$(PY) -m bench serve $(SERVE_OPTS)

overhead: setup ## harness req/s vs bare wrk, alternated (SERVER SCENARIO CONCURRENCY DURATION ROUNDS LEGACY)
	$(PY) -m bench.overhead $(call opt,SERVER,server) $(call opt,SCENARIO,scenario) \
	  $(call opt,CONCURRENCY,concurrency) $(call opt,DURATION,duration) $(call opt,ROUNDS,rounds) \
	  $(call opt,LOAD_THREADS,load-threads) $(call opt,LEGACY,legacy)

# Open-loop study arms and the load-balancer studies (studies/lb) drive oha.
study: export OHA := 1
study: setup ## re-run a source document's experiment (NAME=<study>|all; DURATION, RESULTS apply)
	$(PY) -m bench study $(call opt,NAME,name) $(call opt,DURATION,duration) \
	  $(call opt,RESULTS,results) $(call opt,SEED,seed)

compare: setup ## two result sets side by side: BASE=<dir> HEAD=<dir>, ratios with 95 % intervals
	@$(PY) -m bench compare $(call opt,BASE,base) $(call opt,HEAD,head)

soak: export OHA := 1
soak: setup ## memory of every server process over a long fixed-rate run (DURATION=600 RATE=100 SOAK_INTERVAL=5)
	$(PY) -m bench soak $(BENCH_OPTS) $(call opt,SOAK_INTERVAL,interval)

report: setup ## rebuild summary.md from the records in RESULTS
	$(PY) -m bench report $(call opt,RESULTS,results)

# FORMAT is checked by python -m bench before anything else; the data goes to stdout.
export: setup ## every point of RESULTS as one row: FORMAT=csv|json on stdout (docs/export.md)
	@$(PY) -m bench export $(call opt,FORMAT,format) $(call opt,RESULTS,results)

test: ## run the test suite (unit + integration on the real stack, the emulated arm64 path too)
	@PYWEBBENCH_TEST=1 bash bench/setup.sh
	$(PY) -m pytest $(PYTEST_ARGS)

lint: setup ## ruff check and format check
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

format: setup ## apply ruff format and safe fixes
	$(PY) -m ruff format .
	$(PY) -m ruff check --fix .

lock: setup ## re-pin every requirements.txt (bench/, locust/, servers/*/) from its .in
	@for dir in bench/ locust/ servers/*/; do \
	  [ -f "$$dir/requirements.in" ] || continue; \
	  echo "pinning $$dir"; \
	  (cd "$$dir" && $$(cat $(CURDIR)/.bench/uv-path) pip compile -q --universal --python-version 3.11 \
	    --no-header requirements.in -o requirements.txt) || exit 1; \
	done

# -- the container path (compose/): needs a Docker engine; native runs need none ----------------
COMPOSE ?= $(shell docker compose version >/dev/null 2>&1 && echo "docker compose" || echo docker-compose)
COMPOSE_RUN = $(COMPOSE) -p pywebbench -f compose/compose.yaml
COMPOSE_PASSWORD = .bench/compose-db-password

compose-up: setup ## build and start the stack in containers (SERVER, WORKERS, THREADS, CONNECTIONS)
	@test -s $(COMPOSE_PASSWORD) || $(PY) -c "import secrets; print(secrets.token_urlsafe(18))" > $(COMPOSE_PASSWORD)
	DB_PASSWORD=$$(cat $(COMPOSE_PASSWORD)) SERVER=$(or $(SERVER),granian) $(COMPOSE_RUN) up -d --build
	@echo "waiting for nginx on 127.0.0.1:$(or $(NGINX_PORT),8080)"; for i in $$(seq 1 120); do \
	  curl -fsS http://127.0.0.1:$(or $(NGINX_PORT),8080)/health >/dev/null 2>&1 && exit 0; sleep 1; done; \
	  echo "the stack did not come up: $(COMPOSE_RUN) logs" >&2; exit 1

compose-bench: compose-up ## measure the containers through their nginx with wrk (records: metadata.runtime compose)
	$(PY) -m bench run $(BENCH_OPTS) --target=http://127.0.0.1:$(or $(NGINX_PORT),8080) --runtime=compose

compose-down: ## stop and remove the containers
	DB_PASSWORD=unused $(COMPOSE_RUN) --profile load down
