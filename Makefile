# `make demo` and `make test` do all the set-up on a fresh machine.
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test lint typecheck unit tools manifests clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/ledger-exporter demo

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
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache
