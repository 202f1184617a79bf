# Two entry points, both safe on a fresh machine:
#   make demo   install into .venv, then run the demo job and print what it did
#   make test   install into .venv, then run ruff, mypy and every test
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install demo test lint typecheck pytest bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

demo: install
	$(BIN)/python scripts/demo.py --out demo-out

lint: install
	$(BIN)/ruff check .

typecheck: install
	$(BIN)/mypy

pytest: install
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/pytest

test: lint typecheck pytest

bench: install
	$(BIN)/python benchmarks/read.py

clean:
	rm -rf $(VENV) demo-out .pytest_cache .mypy_cache .ruff_cache
