# changelake — `make help` lists the targets.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
CHANGELAKE := $(BIN)/changelake
DEMO_ROWS ?= 2000
DEMO_RATE ?= 50
DEMO_SECONDS ?= 20
CHAOS_ROWS ?= 2000
CHAOS_ROUNDS ?= 6

.DEFAULT_GOAL := help
.PHONY: help setup up down demo chaos bench test test-unit lint format lock

help: ## list the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F ':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

setup: $(BIN)/python ## install everything once (venv, PostgreSQL, docker-compose, JVM services); a second run only checks
	@$(BIN)/pip install -q --disable-pip-version-check -r requirements-dev.lock
	@$(BIN)/pip install -q --disable-pip-version-check --no-deps -e .
	@$(CHANGELAKE) setup

up: setup ## start the local stack and register connectors/*.json
	@$(CHANGELAKE) stack up
	@$(CHANGELAKE) connectors apply

down: ## stop the local stack
	@$(CHANGELAKE) stack down

DEMO_QUERY ?= SELECT c.country, count(DISTINCT o.id) AS orders, sum(o.total) AS revenue \
  FROM orders o JOIN customers c ON c.id = o.customer_id GROUP BY c.country ORDER BY revenue DESC

DEMO_SEARCH ?= handmade lamp

demo: up ## seed the shop, snapshot it into Delta and OpenSearch, run a workload, apply it, query the lake, search
	@$(CHANGELAKE) demo seed --rows $(DEMO_ROWS)
	@$(CHANGELAKE) run --once
	@$(CHANGELAKE) demo load --rate $(DEMO_RATE) --seconds $(DEMO_SECONDS)
	@$(CHANGELAKE) topics --wait --sample 1
	@$(CHANGELAKE) run --once
	@echo "revenue by country, from the derived Delta tables:"
	@$(CHANGELAKE) query "$(DEMO_QUERY)"
	@echo 'products in stock matching "$(DEMO_SEARCH)", from the OpenSearch index:'
	@$(CHANGELAKE) search "$(DEMO_SEARCH)" --tables products --filter in_stock=true --limit 5

chaos: up ## 6 rounds of 8 faults (SIGKILL pipeline, restart Connect/Kafka/Postgres, stop Connect inside a bulk transaction, resume it from a first-event offset, SIGKILL it while an event table streams, stop OpenSearch) under load; verify after each; then the slow proofs (pytest -m chaos)
	@$(CHANGELAKE) demo seed --rows $(CHAOS_ROWS)
	@$(CHANGELAKE) chaos --rounds $(CHAOS_ROUNDS)
	@$(BIN)/pytest -q -m chaos

bench: up ## benchmark (250k customers, ~2M rows; BENCH_ROWS=1000000 for the 8.1M-row run, BENCH_BESIDE=docs/bench/results.json to set an earlier run beside): snapshot, stage limits, baseline, sustained step-up → .changelake/bench/
	@$(CHANGELAKE) bench $(if $(BENCH_ROWS),--rows $(BENCH_ROWS)) $(if $(BENCH_BESIDE),--beside $(BENCH_BESIDE))

test: setup ## the whole suite against the real services (starts the stack if none runs); `make chaos` runs the slow proofs
	@$(BIN)/pytest -q -m "not chaos"

test-unit: setup ## only the tests that need no services
	@$(BIN)/pytest -q -m "not stack"

lint: setup ## ruff format check, ruff check, mypy
	@$(BIN)/ruff format --check changelake tests
	@$(BIN)/ruff check changelake tests
	@$(BIN)/mypy

format: setup ## apply ruff's formatting and safe fixes
	@$(BIN)/ruff format changelake tests
	@$(BIN)/ruff check --fix changelake tests

lock: ## re-resolve requirements-dev.lock (make setup's) from pyproject.toml, then requirements.lock (the image's) within it
	@$(BIN)/uv pip compile -q pyproject.toml --universal --python-version 3.11 --extra dev --extra bench -o requirements-dev.lock
	@$(BIN)/uv pip compile -q pyproject.toml --universal --python-version 3.11 -c requirements-dev.lock -o requirements.lock
