# The two front-door commands: `make demo` and `make test`. Both set up .venv from the pinned requirements.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip install --quiet --disable-pip-version-check

.PHONY: demo dry-run run test lint-imports e2e clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.runtime: requirements.txt | $(BIN)/python
	$(PIP) --require-hashes -r requirements.txt
	touch $@

# The dev venv also installs this project itself (editable, no dependencies: the pins above are the set),
# which gives the `rwo-failover` console script and makes rwo_testkit importable from anywhere.
$(VENV)/.dev: requirements.txt requirements-dev.txt pyproject.toml $(VENV)/.runtime
	$(PIP) --require-hashes -r requirements-dev.txt
	$(PIP) --no-deps --no-build-isolation -e .
	touch $@

demo: $(VENV)/.runtime  ## a fake broken cluster, a dry-run pass, a real pass, before and after
	$(BIN)/python -m rwo_testkit.demo

dry-run: $(VENV)/.runtime  ## one dry-run pass against the cluster in KUBECONFIG
	$(BIN)/python reconcile.py --once --dry-run

run: $(VENV)/.runtime  ## one real pass against the cluster in KUBECONFIG
	$(BIN)/python reconcile.py --once

lint-imports: $(VENV)/.dev  ## the layer contracts in pyproject.toml
	$(BIN)/lint-imports

test: $(VENV)/.dev  ## the layer contracts, then the whole test suite
	$(BIN)/lint-imports
	$(BIN)/python -m pytest

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis *.egg-info

e2e: $(VENV)/.dev  ## only the end-to-end tier: a real control plane (see tests/e2e and docs/design.md)
	$(BIN)/python -m pytest tests/e2e
