# The two commands of the README's quick start: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test test-unit test-deps http-deps observe-deps cli-reference lint setup system-deps bench clean lock wheels base-image image

# Two installs, each with a stamp of its own: the demo's (the project with its [local] and
# [libraries] extras: what a run needs) and the tests' ([dev]: the demo's, plus pytest, ruff, mypy
# and the tools the tests use). `make demo` then `make test` upgrades the venv to [dev]; a stamp
# older than pyproject.toml or constraints.txt installs again. Both install at the versions of
# constraints.txt (`make lock`), the ones the figures in the docs were measured with: a fresh
# clone's tests run against what the last commit was tested with, not whatever PyPI published
# since (redis-py 8.2 typed `pubsub()`, and a clone's mypy failed on a green commit).
PIP_INSTALL := $(BIN)/pip install --quiet -c constraints.txt
DEMO_STAMP := $(VENV)/.installed-demo
DEV_STAMP := $(VENV)/.installed-dev

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(DEMO_STAMP): pyproject.toml constraints.txt | $(BIN)/python
	$(PIP_INSTALL) -e '.[local,libraries]'
	touch $@

$(DEV_STAMP): pyproject.toml constraints.txt | $(BIN)/python
	$(PIP_INSTALL) -e '.[dev]'
	touch $@

# The developers' set-up: the tests' install.
setup: system-deps $(DEV_STAMP)

# Python venv support and PostgreSQL come from the system; installed here when missing and root.
system-deps:
	@PYTHON=$(PYTHON) sh scripts/ensure-system.sh

# Prometheus and the Redis/PostgreSQL exporters: only `coordinator launch --observe` uses them.
observe-deps:
	@sh scripts/observe-deps.sh

# nginx, Varnish and wrk: the HTTP caches as defences (coordinator/stack/http_caches), the HTTP
# clients' tests and benchmark 8. Debian starts nginx and varnish as services where a service
# manager runs; ours are their own, on loopback ports.
http-deps:
	@sh scripts/http-deps.sh

# 30 s per trial, as experiment 000: about 14 expiries each, enough for every interval.
demo: system-deps $(DEMO_STAMP)
	$(BIN)/coordinator launch --workers 8 --seconds 30

# docs/cli.md from the click commands, the presets and the strategies (a unit test checks it is current).
cli-reference: $(DEMO_STAMP)
	$(BIN)/python -m coordinator.cli.reference

lint: setup
	$(BIN)/ruff check .
	$(BIN)/mypy

# Headless Chromium renders the HTML report in a test (skipped, with the reason, without it);
# Prometheus and its exporters run the --observe test (tests/e2e/test_observe.py).
# nftables drops a link's packets in the namespace lab (tests/e2e/test_netfaults.py).
# memcached serves meta-memcache's leases (tests/integration/test_libraries_promise.py).
# nginx, Varnish and wrk: the HTTP layer's tests (tests/integration/test_http_*.py,
# tests/e2e/test_http_layer.py) and benchmark 8 (make http-deps).
# redis-benchmark (Debian's redis-tools) and Locust ([dev] holds the bench extra) run in the
# benchmarks' tests (tests/e2e/test_bench*.py): installed, so that those tests run rather than skip.
test-deps:
	@sh scripts/http-deps.sh || \
		echo "nginx, varnish or wrk could not be installed: the HTTP tests will be skipped" >&2
	@command -v redis-benchmark >/dev/null || [ "$$(id -u)" != 0 ] || ! command -v apt-get >/dev/null || \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-tools >/dev/null) || \
		echo "redis-tools could not be installed: tests/e2e/test_bench.py will fail" >&2
	@command -v chromium >/dev/null || [ "$$(id -u)" != 0 ] || ! command -v apt-get >/dev/null || \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) || \
		echo "chromium could not be installed: the report screenshot test will be skipped" >&2
	@sh scripts/observe-deps.sh || \
		echo "prometheus could not be installed: the --observe test will be skipped" >&2
	@command -v memcached >/dev/null || [ "$$(id -u)" != 0 ] || ! command -v apt-get >/dev/null || \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq memcached >/dev/null) || \
		echo "memcached could not be installed: the meta-memcache tests will fail" >&2
	@command -v nft >/dev/null || [ "$$(id -u)" != 0 ] || ! command -v apt-get >/dev/null || \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nftables >/dev/null) || \
		echo "nftables could not be installed: the network fault test will be skipped" >&2
	@(command -v dockerd && command -v docker-compose && command -v debootstrap) >/dev/null || \
		[ "$$(id -u)" != 0 ] || ! command -v apt-get >/dev/null || \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io \
			docker-compose debootstrap >/dev/null) || \
		echo "docker.io could not be installed: the container tests will be skipped" >&2

# The project image (Dockerfile). BASE: its base image (python:3.11-slim; where no registry is
# reachable, local/debian:bookworm from `make base-image`). The wheels are built here, on the host,
# at the versions of constraints.txt (`make lock` rewrites it from the working venv).
DOCKER ?= $(shell command -v /usr/bin/docker || command -v docker)
BASE ?= python:3.11-slim
IMAGE ?= stampede-lab:latest

lock: $(DEV_STAMP)
	$(BIN)/python scripts/lock_deps.py

wheels: $(DEV_STAMP)
	@PIP=$(BIN)/pip sh scripts/image-wheels.sh

base-image:
	sh scripts/debian-base.sh local/debian:bookworm

image: wheels
	DOCKER_BUILDKIT=1 $(DOCKER) build --quiet --build-arg BASE=$(BASE) -t $(IMAGE) . || \
		{ echo "make image: the build failed; no registry for $(BASE)? make base-image, then" \
			"make image BASE=local/debian:bookworm" >&2; exit 1; }

# Every test (tests/unit, tests/integration, tests/e2e), then the ten slowest.
test: lint test-deps
	$(BIN)/pytest -q --durations=10

# The edit loop: ruff and the pure tests only (no service, no system packages, no chromium; < 30 s).
test-unit: $(DEV_STAMP)
	$(BIN)/ruff check .
	$(BIN)/pytest tests/unit -q

# nginx (a static endpoint) and wrk (the C floor for HTTP load): benchmark 8 and the HTTP tests.
# Debian starts nginx as a service on its port 80 where a service manager runs; ours are their own.
# redis-benchmark (benchmark 2) comes with Debian's redis-tools; Locust (benchmarks 1 and 8's
# anchor) with the bench extra.
bench: setup http-deps
	@command -v redis-benchmark >/dev/null || [ "$$(id -u)" != 0 ] || \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-tools >/dev/null)
	$(PIP_INSTALL) -e '.[bench]'
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
