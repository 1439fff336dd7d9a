# The two front-door commands: `make demo` and `make test`. Both set up .venv from the pinned requirements.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo dry-run run test clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.runtime: requirements.txt | $(BIN)/python
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements.txt
	touch $@

$(VENV)/.dev: requirements.txt requirements-dev.txt $(VENV)/.runtime
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	touch $@

demo: $(VENV)/.runtime  ## a fake broken cluster, a dry-run pass, a real pass, before and after
	$(BIN)/python reconcile.py --demo

dry-run: $(VENV)/.runtime  ## one dry-run pass against the cluster in KUBECONFIG
	$(BIN)/python reconcile.py --once --dry-run

run: $(VENV)/.runtime  ## one real pass against the cluster in KUBECONFIG
	$(BIN)/python reconcile.py --once

test: $(VENV)/.dev  ## the whole test suite
	$(BIN)/python -m pytest

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
