# `make demo` and `make test` do all the set-up on a fresh machine.
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo package-data test lint typecheck unit tools manifests clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

# The demo needs the exporter alone: its own small venv, without the test toolchain.
DEMO_VENV  := .venv-demo
DEMO_STAMP := $(DEMO_VENV)/.installed

$(DEMO_STAMP): pyproject.toml $(wildcard exporter/*.py exporter/rules/*.yml ledger_simulator/*.py)
	test -x $(DEMO_VENV)/bin/python || $(PYTHON) -m venv $(DEMO_VENV)
	$(DEMO_VENV)/bin/pip install --quiet --upgrade pip
	$(DEMO_VENV)/bin/pip install --quiet .
	touch $(DEMO_STAMP)

demo: $(DEMO_STAMP)
	$(DEMO_VENV)/bin/ledger-exporter demo

# Copy the project's rules into the package, where `ledger-exporter demo --prometheus` finds
# them in an installed wheel; deploy/prometheus/ stays the one place to edit them.
package-data:
	cp deploy/prometheus/rules.yml deploy/prometheus/alerts.yml exporter/rules/

# Debian's prometheus package ships the server and promtool used by the integration tests;
# docker-compose (v1, `config` needs no engine) and amtool check the deployment files;
# chromium renders the landing page in tests/test_landing.py.
tools:
	@command -v promtool >/dev/null && command -v prometheus >/dev/null \
	  && command -v docker-compose >/dev/null && command -v amtool >/dev/null || { \
	  echo "installing Debian's prometheus, prometheus-alertmanager (amtool), docker-compose"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	    prometheus prometheus-alertmanager docker-compose >/dev/null; }
	@command -v chromium >/dev/null || { \
	  echo "installing Debian's chromium (the landing page is tested in a headless browser)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	    chromium >/dev/null; }

# Regenerate the Kubernetes PrometheusRule from deploy/prometheus/{rules,alerts}.yml.
manifests: $(STAMP)
	$(BIN)/python tools/gen_prometheusrule.py

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP) tools
	$(BIN)/pytest

test: lint typecheck unit

clean:
	rm -rf $(VENV) $(DEMO_VENV) build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache
