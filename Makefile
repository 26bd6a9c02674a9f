# Two commands for a newcomer: `make demo` and `make test`. Each bootstraps .venv from pyproject.toml.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: test lint demo clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@

lint: $(BIN)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

test: lint
	$(BIN)/python -m pytest

demo: $(BIN)/.installed
	$(BIN)/research demo

clean:
	rm -rf $(VENV) .pytest_cache
