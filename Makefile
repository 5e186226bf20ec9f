# Caldera's developer entry points. The two that matter on a fresh machine:
#   make demo   set everything up, start a local control plane with fake nodes, show how to use it
#   make test   set everything up and run every check and test (what CI runs)
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
PY := $(VENV)/bin/python
CLUSTER := $(PY) -m e2e.cluster
DEMO_NODES ?= 4
# pytest workers of make test; each e2e worker starts its own local control plane
TEST_WORKERS ?= 3

.PHONY: help install lock lock-upgrade binaries browser up down status demo test check lint fmt typecheck imports \
        unit e2e crds chart-readme bench-smoke experiments clean

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/' | column -t -s $$'\t'

# Every package comes from a hashed lock (docs/reliability.md, "Supply chain"): the installers
# first, then the dependencies, then Caldera itself without build isolation, so that nothing is
# fetched unhashed.
LOCKS := requirements/build.lock requirements/runtime.lock requirements/dev.lock
UV_COMPILE = $(VENV)/bin/uv pip compile --quiet --generate-hashes --universal --python-version 3.11

$(VENV)/.installed: pyproject.toml $(LOCKS)
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
	  { echo "Python 3.11 or newer is required (found $$($(PYTHON) --version))"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --require-hashes -r requirements/build.lock
	$(VENV)/bin/pip install --quiet --require-hashes -r requirements/dev.lock
	$(VENV)/bin/pip install --quiet --no-deps --no-build-isolation -e .
	@touch $@

install: $(VENV)/.installed  ## create .venv with Caldera and its dev tools, from the hashed locks

lock: install  ## resolve requirements/*.lock again after pyproject.toml changed (keeps other pins)
	$(UV_COMPILE) $(LOCK_FLAGS) requirements/build.in -o requirements/build.lock
	$(UV_COMPILE) $(LOCK_FLAGS) pyproject.toml requirements/build.in -o requirements/runtime.lock
	$(UV_COMPILE) $(LOCK_FLAGS) pyproject.toml requirements/build.in --extra dev -o requirements/dev.lock

lock-upgrade:  ## move every pin in requirements/*.lock to the newest version allowed
	$(MAKE) --no-print-directory lock LOCK_FLAGS=--upgrade

binaries:  ## build (once) the control plane binaries into ~/.cache/caldera
	bash e2e/cluster/build.sh >/dev/null

# The dashboard's browser test drives Debian's Chromium through the DevTools protocol (no
# WebDriver needed); e2e/test_dashboard_browser.py is skipped, saying so, where it is missing.
browser:  ## install Chromium (Debian's package) for the browser tests, unless it is there
	@command -v chromium >/dev/null || { \
	  sudo=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  $$sudo apt-get update -qq && $$sudo apt-get install -y -qq chromium; }

up: install binaries  ## start the local control plane with $(DEMO_NODES) fake nodes
	$(CLUSTER) up --nodes $(DEMO_NODES) --cpu 16 --memory 64Gi --gpu 4

down: install  ## stop the local control plane
	$(CLUSTER) down

status: install  ## show which control plane processes run
	$(CLUSTER) status

demo: install binaries  ## the main command: Caldera on a local control plane runs an example job
	$(CLUSTER) demo --nodes $(DEMO_NODES) --cpu 16 --memory 64Gi --gpu 4

lint: install  ## ruff lint and format check
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

fmt: install  ## format the code
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

typecheck: install  ## mypy --strict
	$(VENV)/bin/mypy

imports: install  ## import-linter contracts (docs/architecture.md's import rules)
	$(VENV)/bin/lint-imports

crds: install  ## regenerate the CRDs in charts/caldera/crds from the models
	$(PY) -m caldera.api.crdgen

chart-readme: install  ## regenerate charts/caldera/README.md from the values and their comments
	$(PY) -m scripts.chart_readme

check: lint typecheck imports  ## every static check

unit: install  ## fast tests of pure logic
	$(VENV)/bin/pytest unit

e2e: install binaries  ## tests against the real local control plane
	$(VENV)/bin/pytest e2e

test: install binaries browser check  ## all checks, all tests and every benchmark once, small (CI runs this)
	$(VENV)/bin/pytest -n $(TEST_WORKERS) --dist loadfile
	$(MAKE) --no-print-directory bench-smoke

# bench/_*.py (and __init__.py) are the benchmarks' helpers, not benchmarks
bench-smoke: install  ## every benchmark once, small
	@for b in bench/[!_]*.py; do $(PY) $$b --smoke || exit 1; done

experiments: install  ## run the seed experiments; write docs/experiments.md and docs/experiments.html
	$(PY) -m simulator.experiments --out docs

clean:  ## remove the virtualenv and caches (not the binary cache)
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis
