# The two front-door commands: `make demo` and `make test`. Both set up .venv from the pinned, hashed
# requirements. Each wheel is downloaded once (per Python version) into the wheelhouse; every later install (a
# rebuilt .venv, the tests that install the image's dependencies or the built wheel into a fresh venv) reads only
# from it, so after the first set-up everything works offline. `make clean` keeps the wheelhouse for that reason.
PYTHON ?= python3
VENV ?= .venv
WHEELHOUSE ?= .wheelhouse
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip --disable-pip-version-check
OFFLINE := --no-index --find-links $(WHEELHOUSE) --require-hashes
export WHEELHOUSE

.PHONY: demo dry-run run test quick lint lint-imports e2e mutants crash-check clean rebuild-venv

# A .venv made by another interpreter (an older Python, or one that was upgraded or removed since) is rebuilt
# from scratch: pip would otherwise fail inside it in ways that do not name the cause.
PY_WANT := $(shell $(PYTHON) -c 'import platform; print(platform.python_version())' 2>/dev/null)
PY_HAVE := $(shell $(BIN)/python -c 'import platform; print(platform.python_version())' 2>/dev/null)
ifneq ($(PY_WANT),$(PY_HAVE))
STALE := rebuild-venv
endif

# $(call wheels,FILE): download FILE's wheels, hash-checked, unless the wheelhouse already holds every one of them
# for this venv's Python. pip itself answers that, offline: a wheel built for another Python (the wheelhouse keeps
# every version's, side by side) does not count, so after a Python upgrade the new version's wheels come once.
wheels = @mkdir -p $(WHEELHOUSE) && $(PIP) download --quiet --no-index --find-links $(WHEELHOUSE) --require-hashes \
  --no-deps -r $(1) -d $(WHEELHOUSE) >/dev/null 2>&1 || { \
  echo "downloading the wheels of $(1) for Python $(PY_WANT) into $(WHEELHOUSE) (once: later set-ups are offline)"; \
  $(PIP) download --quiet --require-hashes --no-deps -r $(1) -d $(WHEELHOUSE); }

# Runtime set-up. It starts from an empty .venv every time it runs, so a set-up that failed half-way (no
# .runtime stamp) is never reused. Python is checked first, in plain words.
$(VENV)/.runtime: requirements.txt $(STALE)
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null || { \
	  echo "rwo-failover needs Python 3.11 or newer, but '$(PYTHON)' is $$($(PYTHON) --version 2>&1 || echo 'not found')." >&2; \
	  echo "Install Python 3.11 or newer, then run: make PYTHON=python3.11 $(or $(MAKECMDGOALS),demo)" >&2; exit 1; }
	rm -rf $(VENV)
	$(PYTHON) -m venv $(VENV)
	$(call wheels,requirements.txt)
	$(PIP) install --quiet $(OFFLINE) -r requirements.txt
	touch $@

# The dev venv adds the test tools and this project itself (editable, no dependencies: the pins are the set),
# which gives the `rwo-failover` console script; a .pth file makes rwo_testkit, which the wheel does not
# ship, importable from anywhere (the benchmarks, subprocesses of the tests). It also makes sure the
# wheelhouse holds the runtime's wheels, which the tests install into fresh venvs: a .venv set up before the
# wheelhouse existed has none.
$(VENV)/.dev: requirements-dev.txt pyproject.toml $(VENV)/.runtime
	$(call wheels,requirements.txt)
	$(call wheels,requirements-dev.txt)
	$(PIP) install --quiet $(OFFLINE) -r requirements-dev.txt
	$(PIP) install --quiet --no-deps --no-build-isolation --no-index -e .
	$(BIN)/python -c 'import pathlib, sysconfig; pathlib.Path(sysconfig.get_path("purelib"), "rwo_testkit.pth").write_text(str(pathlib.Path.cwd()) + "\n")'
	touch $@

rebuild-venv:

demo: $(VENV)/.runtime  ## a fake broken cluster, a dry-run pass, a real pass, before and after
	$(BIN)/python -m rwo_testkit.demo

dry-run: $(VENV)/.runtime  ## one dry-run pass against the cluster in KUBECONFIG
	$(BIN)/python reconcile.py --once --dry-run

run: $(VENV)/.runtime  ## one real pass against the cluster in KUBECONFIG
	$(BIN)/python reconcile.py --once

lint-imports: $(VENV)/.dev  ## the layer contracts in pyproject.toml
	$(BIN)/lint-imports

lint: $(VENV)/.dev  ## ruff over the whole tree, mypy strict over rwo_failover, the layer contracts (pyproject.toml)
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports

test: lint  ## the linters, then the whole test suite: both tiers side by side (rwo_testkit/tiers.py)
	$(BIN)/python -m rwo_testkit.tiers

quick: lint  ## the inner loop: the linters, then the fixture tier without the slow tests
	$(BIN)/python -m pytest -q -m "not slow" --ignore=tests/e2e

e2e: $(VENV)/.dev  ## only the end-to-end tier: a real control plane (see tests/e2e and docs/design.md)
	$(BIN)/python -m pytest tests/e2e

mutants: $(VENV)/.dev  ## mutation testing of the safety modules (mutmut; docs/testing.md); MUTANTS=group... for some
	$(BIN)/python -m rwo_testkit.mutants $(MUTANTS)

crash-check: $(VENV)/.dev  ## the fixture tier with every pass crashing after observe: no test may pass that runs one
	$(BIN)/python -m rwo_testkit.crash_check

clean:  ## remove the venv and caches (the wheelhouse stays, so the next set-up is offline)
	rm -rf $(VENV) .pytest_cache .hypothesis *.egg-info build
