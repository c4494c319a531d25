# `make demo` and `make test` do all the set-up on a fresh machine.
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo mixin test lint typecheck unit fuzz tools clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

# The demo needs the exporter alone: its own small venv, without the test toolchain.
DEMO_VENV  := .venv-demo
DEMO_STAMP := $(DEMO_VENV)/.installed

$(DEMO_STAMP): pyproject.toml $(wildcard exporter/*.py exporter/*/*.py exporter/rules/*.yml ledger_simulator/*.py)
	test -x $(DEMO_VENV)/bin/python || $(PYTHON) -m venv $(DEMO_VENV)
	$(DEMO_VENV)/bin/pip install --quiet --upgrade pip
	$(DEMO_VENV)/bin/pip install --quiet .
	touch $(DEMO_STAMP)

demo: $(DEMO_STAMP)
	$(DEMO_VENV)/bin/ledger-exporter demo

# Render the monitoring mixin (mixin/, the one place to edit alerts, rules and dashboards)
# into every file shipped from it: deploy/prometheus/{alerts,rules}.yml, the package's copy
# in exporter/rules/ (for `ledger-exporter demo --prometheus`), the Kubernetes PrometheusRule
# and dashboards ConfigMap, grafana/dashboards/*.json. tests/test_mixin.py fails when one of
# them differs from the rendering.
mixin: $(STAMP)
	$(BIN)/python tools/render_mixin.py

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
	@command -v faketime >/dev/null || { \
	  echo "installing Debian's faketime (tests/test_wall_clock_step.py steps the exporter's wall clock)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	    faketime >/dev/null; }

# lint-imports: the layers and contracts of pyproject.toml's [tool.importlinter].
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports --no-cache --no-logo

typecheck: $(STAMP)
	$(BIN)/mypy

# Test files run in TEST_WORKERS processes, each file whole in one of them (--dist loadfile:
# a module's fixtures are set up once); the suite mostly waits on servers, so 3 fit 2 cores.
TEST_WORKERS ?= 3

unit: $(STAMP) tools
	$(BIN)/pytest -n $(TEST_WORKERS) --dist loadfile

test: lint typecheck unit

# A long campaign of the generated-input suites (README, "How it is tested"): FUZZ_EXAMPLES
# examples per property and per schemathesis operation, with random seeds (hypothesis's
# "campaign" profile; what it finds is replayed from .hypothesis/). make fuzz FUZZ_EXAMPLES=N.
FUZZ_EXAMPLES ?= 5000
FUZZ_SUITES := tests/test_node_answers.py tests/test_node_answers_sockets.py \
	tests/test_server_fuzz.py tests/test_simulator_openapi.py

fuzz: $(STAMP) tools
	LEDGER_TEST_EXAMPLES=$(FUZZ_EXAMPLES) $(BIN)/pytest $(FUZZ_SUITES)

clean:
	rm -rf $(VENV) $(DEMO_VENV) build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache
