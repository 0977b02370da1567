# One entry point for humans and CI. Every target installs what it needs
# first (idempotent), so a fresh clone needs only Python 3.11, Node.js and make.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
CDK_STAMP := $(VENV)/.installed-cdk
export JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION := 1
export JSII_SILENCE_WARNING_UNTESTED_NODE_VERSION := 1
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export CDK_DISABLE_CLI_TELEMETRY := true
export PATH := $(CURDIR)/$(VENV)/bin:$(CURDIR)/node_modules/.bin:$(PATH)
# Python caches compiled modules (__pycache__, gitignored) even where the environment says not to
# (PYTHONDONTWRITEBYTECODE, set on the CI machine): the test suite and synthesis start hundreds of Python processes
# that import the same modules (import torch: 13.7 s uncached against 6.1 s, 2026-11-23).
CACHE_BYTECODE := env -u PYTHONDONTWRITEBYTECODE

.PHONY: setup setup-synth synth test test-gpu bench docs clean prometheus-tools

# `make test` needs everything (dev extras, Node deps, the Prometheus tools); `make synth` only the CDK extras and
# the Node deps: no torch, no system packages.
# The installs are independent (pip into the venv, npm into node_modules, apt for the Prometheus tools) and spend
# much of their time waiting on the registries, so they run side by side.
setup:
	@$(MAKE) --no-print-directory -j3 $(STAMP) node_modules/.installed prometheus-tools
setup-synth:
	@$(MAKE) --no-print-directory -j2 $(CDK_STAMP) node_modules/.installed

# promtool and prometheus (Debian package `prometheus`), amtool and prometheus-alertmanager
# (`prometheus-alertmanager`) for the rule, scrape, alert routing and end-to-end alerting tests: found on PATH,
# else installed with apt-get as root or with passwordless sudo, else a message says what to install (those tests then skip locally; CI=true fails them). Idempotent.
prometheus-tools:
	@if command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1 && command -v amtool >/dev/null 2>&1 && command -v prometheus-alertmanager >/dev/null 2>&1; then :; \
	elif command -v apt-get >/dev/null 2>&1 && { [ "$$(id -u)" = 0 ] || sudo -n true 2>/dev/null; }; then \
	  echo "setup: apt-get: prometheus, prometheus-alertmanager (promtool, amtool for the alert tests)"; \
	  SUDO=$$([ "$$(id -u)" = 0 ] || echo "sudo -n"); \
	  $$SUDO apt-get update -qq && \
	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus prometheus-alertmanager; \
	else \
	  echo "note: promtool, prometheus, amtool or prometheus-alertmanager not found and cannot be installed here without a password:" >&2; \
	  echo "      install the system packages prometheus and prometheus-alertmanager (Debian/Ubuntu:" >&2; \
	  echo "      sudo apt-get install prometheus prometheus-alertmanager) or put the binaries from" >&2; \
	  echo "      https://prometheus.io/download/ on PATH; until then the tests that run them are skipped" >&2; \
	fi

$(VENV)/bin/python:
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null || { \
	  echo "error: $(PYTHON) is not Python >= 3.11; run make PYTHON=python3.11 ..." >&2; exit 1; }
	@echo "setup: creating the virtual environment $(VENV)"
	$(PYTHON) -m venv $(VENV) || { echo "error: '$(PYTHON) -m venv' failed: install your Python's venv module" \
	  "(Debian/Ubuntu: the python3-venv package)" >&2; rm -rf $(VENV); exit 1; }
	$(PY) -m pip install --quiet --upgrade pip

# Synthesis only: aws-cdk-lib, cdk-nag, cfn-lint (app.py imports nothing else; measured 2026-11-25).
$(CDK_STAMP): pyproject.toml | $(VENV)/bin/python
	@echo "setup: pip: openpod[cdk] (aws-cdk-lib, cdk-nag, cfn-lint) into $(VENV), about a minute"
	$(PY) -m pip install --quiet -e '.[cdk]'
	touch $@

$(STAMP): pyproject.toml | $(VENV)/bin/python
	@# No byte-compiling here (pip's, on one core, took 136 s on the 2-core CI machine; compileall on both, 41 s):
	@# the tests run with bytecode caching on (CACHE_BYTECODE above), so each module they import is compiled once, by
	@# the first process that imports it, and only those (2026-11-28, fresh clone: the whole suite 571 s with
	@# nothing compiled before, against 598 s with the venv compiled and PYTHONDONTWRITEBYTECODE=1, which also left
	@# the project's own modules to be compiled again in each of the suite's hundreds of Python processes).
	@echo "setup: pip: openpod[dev] (CDK, torch CPU, boto3, kubernetes, test tools) into $(VENV), several minutes"
	$(PY) -m pip install --quiet --no-compile -e '.[dev]'
	touch $@ $(CDK_STAMP)

node_modules/.installed: package.json
	@command -v npm >/dev/null 2>&1 || { echo "error: npm not found: install Node.js 20+ (22 or 24 preferred)" >&2; exit 1; }
	@echo "setup: npm: the CDK CLI (package.json) into node_modules/"
	npm install --no-audit --no-fund --loglevel=error
	touch $@

# Synthesize the platform: SPEC=path/to/spec.yaml (the bundled example unless given; said in the last line).
SPEC ?= examples/default.yaml
synth: setup-synth
	$(CACHE_BYTECODE) cdk synth --quiet -c spec=$(SPEC) > /dev/null
	@echo "synthesized $(SPEC) into cdk.out/"

# Three xdist workers on the 2-core CI machine: much of the suite waits (rendezvous and watchdog timeouts, the
# alerting timelines, killed runs), and a third worker fills those gaps. Subsets of the slow tests, -n 2 against
# -n 3 (2026-11-29, every test passing): the waiting ones 166 -> 147 s and 169 -> 146 s, the computing ones
# 123 -> 121 s. The whole suite from a fresh clone: 479 s (597 s at -n 2 the stop before), 595 s with a busy
# process beside it, every test passing.
test: setup
	$(CACHE_BYTECODE) $(PY) -m pytest -n 3 --dist loadgroup --durations=25

# The GPU suite (tests/gpu, marker gpu) on a machine with CUDA and NVML: a missing GPU or NVML is an error here,
# not a run of skips. One process, one GPU at a time (NCCL allows one rank per GPU). docs/training.md, "GPU suite".
test-gpu: setup
	OPENPOD_REQUIRE_GPU=1 $(CACHE_BYTECODE) $(PY) -m pytest -n 0 -m gpu -v --durations=0 tests/gpu $(PYTEST_ARGS)

bench: setup
	$(PY) -m benchmarks

docs: setup
	$(PY) -m infra docs

clean:
	rm -rf cdk.out .pytest_cache
