# The two commands of the README's quick start: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test lint setup system-deps bench clean

$(BIN)/coordinator: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

setup: system-deps $(BIN)/coordinator

# PostgreSQL server binaries come from the system; installed here when missing and root.
system-deps:
	@sh scripts/ensure-postgres.sh

demo: setup
	$(BIN)/coordinator launch --workers 8

lint: setup
	$(BIN)/ruff check .
	$(BIN)/mypy

test: lint
	$(BIN)/pytest -q

# redis-benchmark (benchmark 2) comes with Debian's redis-tools.
bench: setup
	@command -v redis-benchmark >/dev/null || [ "$$(id -u)" != 0 ] || \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-tools >/dev/null)
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
