# Two entry points do all set-up on a fresh Debian 12 / Python 3.11 machine:
#   make demo   - draw the bundled default model's partition (out/default.svg)
#   make test   - lint and run the test suite
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
BIN := $(VENV)/bin
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
export TOPHUB_LOCATION := NONE
# The torch executor tests fail instead of skipping when torch is missing (it is a test dependency).
export PARTITION_LAB_REQUIRE_TORCH := 1

.PHONY: setup demo test bench lint clean

setup: $(VENV)/.installed

$(VENV)/.installed: setup.cfg pyproject.toml
	@command -v dot >/dev/null || { $(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q graphviz; }
	@[ -x $(BIN)/python ] || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	@touch $@

demo: setup
	@mkdir -p out
	$(BIN)/partition-lab viz -o out/default.svg

lint: setup
	$(BIN)/ruff check src tests bench examples

test: lint
	$(BIN)/pytest -q -n 2 --dist loadfile

bench: setup
	$(BIN)/python bench/bench_partition.py
	$(BIN)/python bench/bench_strategies.py
	$(BIN)/python bench/load_times.py

clean:
	rm -rf $(VENV) out .pytest_cache
