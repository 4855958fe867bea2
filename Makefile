# Two entry points do all set-up on a fresh Debian 12 / Python 3.11 machine:
#   make demo   - draw the bundled default model's partition (out/default.svg)
#   make test   - lint and run the test suite (Python 3.11 with the [mxnet] extra)
#   make bench  - the CPU benchmarks, quick size (FULL=1: full sizes; python -m bench list)
# and one for the newest Python that pyenv has (CI runs it last):
#   make test-py [PY=3.13]   - the suite on that Python, without MXNet (its tests skip)
# and one for the Relax adapter (apache-tvm 0.27, its own venv; CI runs it after make test):
#   make test-relax [RELAX_PY=3.12]   - tests/relax in .venv-relax (Python 3.11 by default)
# TVM is an extra: [relay] (TVM 0.19, these venvs but .venv-relax) or [relax] (apache-tvm).
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
BIN := $(VENV)/bin
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
export TOPHUB_LOCATION := NONE
# The torch executor tests fail instead of skipping when torch is missing (it is a test dependency),
# and so do the MXNet tests when MXNet is (make test installs the [mxnet] extra).
export PARTITION_LAB_REQUIRE_TORCH := 1
export PARTITION_LAB_REQUIRE_MXNET := 1
# And the HTML view's browser tests when chromium or chromedriver is (make setup installs them).
export PARTITION_LAB_REQUIRE_BROWSER := 1
# test-py: PY is a minor version (3.12, 3.13); default the newest supported one pyenv has.
PYENV_VERSIONS ?= $(or $(PYENV_ROOT),$(HOME)/.pyenv)/versions
SUPPORTED_PY := 3.13 3.12
PY ?= $(or $(firstword $(foreach v,$(SUPPORTED_PY),$(if $(wildcard $(PYENV_VERSIONS)/$(v).*/bin/python),$(v)))),none)
PY_PYTHON = $(shell ls -d $(PYENV_VERSIONS)/$(PY).*/bin/python 2>/dev/null | sort -V | tail -n 1)
PY_VENV = .venv-py$(PY)
# test-relax: apache-tvm 0.27 and the TVM 0.19 wheel both install `tvm`, so the Relax stack has a
# venv of its own: the package with its [relax] extra (no TVM 0.19) and [test-relax] (pytest, torch).
# Python 3.11 by default: torch (its torch.export test) is then the 700 MB CPU wheel
# (torch==2.13.0 lies on this workplace's disk for 3.11), not a CUDA build of several GB, which
# beside the other two venvs' torch filled CI's disk. RELAX_PY=3.12 or 3.13 takes one from pyenv.
RELAX_PY ?= 3.11
RELAX_PYTHON = $(if $(filter 3.11,$(RELAX_PY)),$(PYTHON),$(shell ls -d $(PYENV_VERSIONS)/$(RELAX_PY).*/bin/python 2>/dev/null | sort -V | tail -n 1))
RELAX_VENV = .venv-relax

.PHONY: setup demo test test-py test-relax print-py bench lint clean

setup: $(VENV)/.installed

# chromium and chromium-driver: the HTML view's tests load it in headless Chromium.
$(VENV)/.installed: setup.cfg pyproject.toml
	@command -v dot >/dev/null && command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
		{ $(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q graphviz chromium chromium-driver; }
	@[ -x $(BIN)/python ] || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[relay,mxnet,test]'
	@touch $@

demo: setup
	@mkdir -p out
	$(BIN)/partition-lab viz -o out/default.svg

lint: setup
	$(BIN)/ruff check src tests bench experiments examples

# --durations: the slowest tests in every run's log (tests/conftest.py's RUN_FIRST order is
# read off it).
test: lint
	$(BIN)/pytest -q -n 2 --dist loadfile --no-loadscope-reorder --durations=25

# Every test function, but one zoo model per function parametrized over models
# (PARTITION_LAB_ONE_MODEL_PER_TEST; tests/conftest.py says why that is what can differ between
# Pythons). MXNet tests skip (tests/conftest.py); numpy is 2.x there. PATH: tests run the
# partition-lab console script.
test-py: $(PY_VENV)/.installed
	PATH="$(CURDIR)/$(PY_VENV)/bin:$$PATH" PARTITION_LAB_REQUIRE_MXNET=0 PARTITION_LAB_ONE_MODEL_PER_TEST=1 \
		$(PY_VENV)/bin/pytest -q -n 2 --dist loadfile --no-loadscope-reorder --durations=15

# The Python version test-py would use, or "none" (.ci/run asks).
print-py:
	@echo $(PY)

$(PY_VENV)/.installed: setup.cfg pyproject.toml
	@[ "$(PY)" != none ] || { echo "test-py: no Python 3.13 or 3.12 in $(PYENV_VERSIONS) (pyenv install 3.13)" >&2; exit 1; }
	@[ -n "$(filter $(PY),3.11 $(SUPPORTED_PY))" ] || { echo "test-py: PY=$(PY) is not a supported Python (3.11, 3.12, 3.13)" >&2; exit 1; }
	@[ -n "$(PY_PYTHON)" ] || { echo "test-py: no Python $(PY) in $(PYENV_VERSIONS) (pyenv install $(PY))" >&2; exit 1; }
	@command -v dot >/dev/null && command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
		{ $(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q graphviz chromium chromium-driver; }
	@[ -x $(PY_VENV)/bin/python ] || $(PY_PYTHON) -m venv $(PY_VENV)
	$(PY_VENV)/bin/pip install -q --upgrade pip
	$(PY_VENV)/bin/pip install -q -e '.[relay,test]'
	@touch $@

test-relax: $(RELAX_VENV)/.installed
	PARTITION_LAB_REQUIRE_MXNET=0 PARTITION_LAB_REQUIRE_TORCH=1 $(RELAX_VENV)/bin/python -m pytest -q \
		-n 2 --dist loadfile --durations=10 tests/relax

$(RELAX_VENV)/.installed: setup.cfg pyproject.toml
	@[ -n "$(RELAX_PYTHON)" ] || { echo "test-relax: no Python $(RELAX_PY) in $(PYENV_VERSIONS) (pyenv install $(RELAX_PY), or RELAX_PY=3.13)" >&2; exit 1; }
	@[ -x $(RELAX_VENV)/bin/python ] || $(RELAX_PYTHON) -m venv $(RELAX_VENV)
	$(RELAX_VENV)/bin/pip install -q --upgrade pip
	$(RELAX_VENV)/bin/pip install -q -e '.[relax,test-relax]'
	@touch $@

# The CPU benchmarks at their quick size (a few minutes on 2 cores); FULL=1 for the full sizes
# (the figures of docs/evidence/performance.md). python -m bench list names them all.
bench: setup
	$(BIN)/python -m bench cpu $(if $(FULL),--full)

clean:
	rm -rf $(VENV) .venv-py3.* $(RELAX_VENV) out .pytest_cache
