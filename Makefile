# Two commands for a newcomer: `make demo` and `make test`. Each bootstraps .venv from pyproject.toml.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: test test-3.13 lint typecheck demo bench clean third-party jaeger jaeger-ui jaeger-run docs

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@

lint: $(BIN)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# The official TypeScript MCP client, for the interop test (tests/test_interop.py); where node is
# absent that test is skipped and says so.
INTEROP := tests/interop
$(INTEROP)/node_modules/.installed: $(INTEROP)/package.json $(INTEROP)/package-lock.json
	@if command -v npm >/dev/null; then npm ci --prefix $(INTEROP) --no-audit --no-fund --silent && touch $@; \
	else echo "npm is not installed: the TypeScript SDK interop test will be skipped"; fi

# Third-party MCP servers, started as their users start them, to measure the errors they really send
# (tests/test_third_party.py): server-filesystem comes with the npm install above; mcp-server-time gets
# a venv of its own (it pins its own mcp), never the project's. Where pip cannot install it, the
# time-server tests are skipped and say so.
THIRD_PARTY := .third-party
TIME_SERVER := $(THIRD_PARTY)/time/bin/mcp-server-time
third-party: $(TIME_SERVER)
$(TIME_SERVER):
	@$(PYTHON) -m venv $(THIRD_PARTY)/time && $(THIRD_PARTY)/time/bin/pip install --quiet mcp-server-time==2026.10.19 \
	|| echo "mcp-server-time could not be installed: the time-server tests will be skipped"

# Jaeger v2, the all-in-one binary, built from its Go module (the release docker-compose.yml pins), for
# the tests against a real Jaeger (tests/test_jaeger.py); a one-time build of about four minutes and a
# 1.3 GB module cache. `go install ...@version` refuses this module (its go.mod has replace
# directives), so a module of our own takes it as a tool. Where Go is absent or the build fails, those
# tests are skipped and say so. The Go module v1.75.0 is the release Jaeger v2.12.0 (its CHANGELOG:
# "v1.75.0 / v2.12.0"); the path holds the version, so changing it builds the new one.
JAEGER_VERSION := v1.75.0
JAEGER_DIR := $(THIRD_PARTY)/jaeger/$(JAEGER_VERSION)
JAEGER := $(JAEGER_DIR)/bin/jaeger
jaeger: $(JAEGER)
$(JAEGER):
	@if command -v go >/dev/null; then \
	  mkdir -p $(JAEGER_DIR)/module && cd $(JAEGER_DIR)/module \
	  && { [ -f go.mod ] || go mod init research-coordinator/jaeger >build.log 2>&1; } \
	  && go get -tool github.com/jaegertracing/jaeger/cmd/jaeger@$(JAEGER_VERSION) >>build.log 2>&1 \
	  && go build -o ../bin/jaeger github.com/jaegertracing/jaeger/cmd/jaeger >>build.log 2>&1 \
	  || echo "Jaeger could not be built (see $(JAEGER_DIR)/module/build.log): the Jaeger tests will be skipped"; \
	else echo "go is not installed: the Jaeger tests will be skipped"; fi

# Jaeger's UI for that binary, which embeds only a placeholder page (the UI's assets are not in the Go
# module): jaeger-ui at the tag of the same release (v1.75.0, released with Jaeger v2.12.0), built with
# npm (its graph library, plexus, first) and served through the query extension's ui.assets_path
# (traces/jaeger.yaml reads JAEGER_UI_ASSETS). The source is cloned from GitHub, or JAEGER_UI_SOURCE=DIR
# names a checkout of that tag; it asks for Node 24 and builds with Node 20 too (--engine-strict=false).
JAEGER_UI_VERSION := v1.75.0
JAEGER_UI_SOURCE ?= $(JAEGER_DIR)/ui-source
JAEGER_UI := $(JAEGER_DIR)/ui
jaeger-ui: $(JAEGER_UI)/index.html
$(JAEGER_UI)/index.html:
	@test -d $(JAEGER_UI_SOURCE) || git clone --quiet --depth 1 --branch $(JAEGER_UI_VERSION) \
	  https://github.com/jaegertracing/jaeger-ui $(JAEGER_UI_SOURCE)
	cd $(JAEGER_UI_SOURCE) && npm ci --ignore-scripts --no-audit --no-fund --engine-strict=false \
	  && npm run --workspace @jaegertracing/plexus build \
	  && cd packages/jaeger-ui && NODE_ENV=production REACT_APP_VSN_STATE='{}' npx vite build
	rm -rf $(JAEGER_UI) && cp -r $(JAEGER_UI_SOURCE)/packages/jaeger-ui/build $(JAEGER_UI)

# Jaeger on 127.0.0.1 for a machine without Docker: OTLP/HTTP on 4318, the query API and the UI (once
# `make jaeger-ui` built it; else Jaeger's placeholder page) on 16686 (`research ask --otlp` prints the
# link). Ctrl-C stops it; traces live in its memory.
jaeger-run: $(JAEGER)
	@test -x $(JAEGER) || { echo "no Jaeger binary at $(JAEGER): it needs Go to build (make jaeger)"; exit 1; }
	$(if $(wildcard $(JAEGER_UI)/index.html),JAEGER_UI_ASSETS=$(abspath $(JAEGER_UI))) $(JAEGER) --config=file:traces/jaeger.yaml

# Ray, the optional extra behind `research batch --engine ray` (tests/test_batch_ray.py); where pip
# cannot install it, those tests are skipped and say so.
RAY := $(BIN)/.ray-installed
$(RAY): $(BIN)/.installed
	@$(BIN)/python -m pip install --quiet -e '.[ray]' && touch $@ \
	|| echo "Ray could not be installed: the Ray batch tests will be skipped"

# The docs site (mkdocs.yml, pages in docs/): the optional extra, installed for the suite too, which
# builds the site strictly and runs every command the pages print (tests/test_docs.py).
DOCS := $(BIN)/.docs-installed
$(DOCS): $(BIN)/.installed
	$(BIN)/python -m pip install --quiet -e '.[docs]' && touch $@

# Serve the docs on 127.0.0.1:8000 (DOCS_ADDRESS=127.0.0.1:PORT for another port), rebuilt on each change.
DOCS_ADDRESS ?= 127.0.0.1:8000
docs: $(DOCS)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve --dev-addr $(DOCS_ADDRESS)

# Strict types on the four packages (the settings are in pyproject.toml, [tool.mypy]).
typecheck: $(BIN)/.installed $(RAY)
	$(BIN)/mypy

test: $(RAY) $(DOCS) lint typecheck $(INTEROP)/node_modules/.installed $(TIME_SERVER) $(JAEGER)
	$(BIN)/python -m pytest

# The newest Python that requires-python claims, beside the oldest (`make test`, the default): a venv
# of its own built from pyproject.toml with the same extras, and the same pytest run. The interpreter:
# python3.13 on the PATH, else pyenv's 3.13 (PYTHON_NEWEST=... for another). The checks that do not
# depend on the interpreter (lint, typecheck, the npm install, the third-party builds) run in `make test`.
PYTHON_NEWEST ?= $(shell python3.13 -c pass 2>/dev/null && echo python3.13 || { p=$$(pyenv prefix 3.13 2>/dev/null) && echo $$p/bin/python3.13; })
NEWEST := .venv-3.13
$(NEWEST)/.installed: pyproject.toml
	@test -n "$(PYTHON_NEWEST)" || { echo "no Python 3.13: put python3.13 on the PATH, or set PYTHON_NEWEST"; exit 1; }
	$(PYTHON_NEWEST) -m venv $(NEWEST)
	$(NEWEST)/bin/python -m pip install --quiet --upgrade pip
	$(NEWEST)/bin/python -m pip install --quiet -e '.[test,docs]'
	@$(NEWEST)/bin/python -m pip install --quiet -e '.[ray]' \
	|| echo "Ray could not be installed on 3.13: the Ray batch tests will be skipped"
	touch $@

test-3.13: $(NEWEST)/.installed $(INTEROP)/node_modules/.installed $(TIME_SERVER) $(JAEGER)
	$(NEWEST)/bin/python -m pytest

# The main job on the embedded default: five sources spawned over stdio, local SQLite data. The
# tickets source is given a seeded transient fault (its first call fails, the retry succeeds), and
# the £750 refund is above the automatic limit, so the answer is partial (exit status 3) by design.
DEMO_QUERY := Investigate jane.doe@example.com: recent orders, open tickets, and whether a £750 refund on ORD-10023 is allowed
demo: $(BIN)/.installed
	$(BIN)/research ask "$(DEMO_QUERY)" --faults tickets:transient=0.5,seed=13 --seed 1 || [ $$? -eq 3 ]

# Every benchmark, one at a time, then `research compare`: one dated file in benchmarks/results/ (and latest.md).
bench: $(RAY)
	$(BIN)/python benchmarks/run_all.py

clean:
	rm -rf $(VENV) $(NEWEST) .pytest_cache $(INTEROP)/node_modules $(THIRD_PARTY)
