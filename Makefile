# One entry point for humans and CI. Every target installs what it needs
# first (idempotent), so a fresh clone needs only Python 3.11, Node.js and make.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION := 1
export JSII_SILENCE_WARNING_UNTESTED_NODE_VERSION := 1
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export CDK_DISABLE_CLI_TELEMETRY := true
export PATH := $(CURDIR)/$(VENV)/bin:$(CURDIR)/node_modules/.bin:$(PATH)

.PHONY: setup synth test bench docs clean prometheus-tools

setup: $(STAMP) node_modules/.installed prometheus-tools

# promtool and prometheus (Debian package `prometheus`), amtool and prometheus-alertmanager
# (`prometheus-alertmanager`) for the rule, scrape, alert routing and end-to-end alerting tests; idempotent.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
prometheus-tools:
	@command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1 && command -v amtool >/dev/null 2>&1 && command -v prometheus-alertmanager >/dev/null 2>&1 || { \
	  $(SUDO) apt-get update -qq && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus prometheus-alertmanager; }

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet --no-compile -e '.[dev]'
	@# Byte-compile on both cores instead of pip's one (2026-11-23, fresh venv on the 2-core CI machine: pip
	@# install 136 s compiling, 41 s + 43 s this way). Tests start hundreds of Python processes, and where
	@# PYTHONDONTWRITEBYTECODE is set nothing would be cached later (import torch: 13.7 s against 6.1 s).
	@# Like pip, it skips files that do not compile on this Python (torch 2.13.0 ships one written for 3.12:
	@# torch/testing/_internal/py312_intrinsics.py, seen in the wheel 2026-11-23).
	$(PY) -m compileall -qq -j 0 $(VENV)/lib > /dev/null || true
	touch $@

node_modules/.installed: package.json
	npm install --no-audit --no-fund --loglevel=error
	touch $@

# Synthesize the platform (SPEC=path/to/spec.yaml, default: the embedded example).
synth: setup
	cdk synth --quiet $(if $(SPEC),-c spec=$(SPEC)) > /dev/null
	@echo "synthesized $(if $(SPEC),$(SPEC),examples/default.yaml) into cdk.out/"

test: setup
	$(PY) -m pytest -n 2 --dist loadgroup --durations=25

bench: setup
	$(PY) -m benchmarks

docs: setup
	$(PY) -m infra docs

clean:
	rm -rf cdk.out .pytest_cache
