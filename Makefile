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

# Until the coordinator lands (`research ask`), the demo is a tour of the five sources and the
# contract: a success, a valid empty result, and one error of each category. A tool error exits 1,
# which the leading '-' lets the tour go past.
demo: $(BIN)/.installed
	$(BIN)/research sources list
	$(BIN)/research sources call customers customer_lookup '{"identifier": "jane.doe@example.com"}'
	$(BIN)/research sources call orders search_orders '{"customer_id": "CUST-00077"}'
	-$(BIN)/research sources call orders search_orders '{"customer_id": "CUST-00042", "sku": "sku-4417-blk"}'
	-$(BIN)/research sources call customers customer_lookup '{"identifier": "CUST-00013"}'
	-$(BIN)/research sources call billing list_invoices '{"customer_id": "CUST-00042"}'
	-$(BIN)/research sources call billing refund_eligibility '{"order_id": "ORD-10023", "amount": 750}' --scope billing:read
	-$(BIN)/research sources call customers customer_lookup '{"identifier": "CUST-00042", "mode": "timeout"}'

clean:
	rm -rf $(VENV) .pytest_cache
