# The project image: Celery worker and coordinator for remote mode (services given by URL). It never
# runs the embedded stack, so it carries no PostgreSQL server, no embedded Valkey and no matplotlib
# (the [local] extra; `coordinator report` says so in one line). It carries the libraries under
# test (the [libraries] extra), so remote workers run them too.
#
#   make image                                   # public base python:3.11-slim, wheels built on the host
#   make image BASE=local/debian:bookworm        # no registry: a Debian base from `make base-image`
#   docker build -t stampede-lab:latest .        # with network, no `make wheels`: pip downloads the
#                                                # pinned versions (constraints.txt) inside the build
# Python packages come from deploy/wheels (`make wheels`, built on the host) with `--no-index` when
# it holds wheels; the base's Python is used, or Debian's python3 when the base has none.
ARG BASE=python:3.11-slim

# --- runtime: the base, Python, the non-root user ---
FROM ${BASE} AS runtime
ENV PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PATH=/opt/venv/bin:$PATH STAMPEDE_HEALTH_FILE=/tmp/stampede-worker.alive
RUN if ! command -v python3 >/dev/null; then \
        apt-get update -qq \
        && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            python3 python3-venv >/dev/null \
        && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/cache/apt/archives/*.deb; \
    fi \
    && useradd --uid 10001 --create-home --shell /usr/sbin/nologin stampede \
    && mkdir -p /data/runs && chown 10001:10001 /data/runs

# --- deps: a venv with the pinned dependencies (its layer changes only when they do) ---
FROM runtime AS deps
# (a base with python3 but without ensurepip: Debian's python3-venv)
RUN python3 -c "import ensurepip" 2>/dev/null || { apt-get update -qq \
        && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-venv >/dev/null; }
RUN python3 -m venv /opt/venv
COPY deploy/wheels /wheels
COPY pyproject.toml constraints.txt /src/
# From the host-built wheels without an index when there are any; else from PyPI (network).
RUN if ls /wheels/*.whl >/dev/null 2>&1; then echo "--no-index --find-links /wheels" >/src/from; \
    else : >/src/from; fi \
    && python3 -c 'import tomllib; p = tomllib.load(open("/src/pyproject.toml", "rb"))["project"]; \
print("\n".join(p["dependencies"] + p["optional-dependencies"]["libraries"]))' >/src/requirements.txt \
    && pip install --quiet $(cat /src/from) -c /src/constraints.txt -r /src/requirements.txt

# --- build: the project itself, apart (a source change rebuilds this small layer only) ---
FROM deps AS build
COPY README.md /src/
COPY coordinator /src/coordinator
COPY model /src/model
COPY worker /src/worker
COPY app /src/app
COPY strategies /src/strategies
COPY adapters /src/adapters
COPY results /src/results
COPY simulate /src/simulate
RUN pip install --quiet $(cat /src/from) --no-deps -c /src/constraints.txt --target /opt/stampede /src

# --- venv: the dependencies without the installer (pip, setuptools) ---
FROM deps AS venv
RUN pip uninstall --quiet -y pip setuptools

# --- the image: no pip, no wheels, no sources, no apt lists ---
FROM runtime
COPY --from=venv /opt/venv /opt/venv
COPY --from=build /opt/stampede /opt/stampede
# Two malloc arenas a process, as the embedded stack's workers (coordinator/stack/celery_workers.py).
ENV PYTHONPATH=/opt/stampede PATH=/opt/stampede/bin:$PATH MALLOC_ARENA_MAX=2
USER 10001
WORKDIR /data
# Default: one Celery worker named after the container (compose --scale and k8s replicas). Its
# healthcheck is `python -m worker.health` (worker/health.py), not `celery inspect ping`.
CMD ["celery", "-A", "worker.app", "worker", "--pool", "solo", "--concurrency", "1", \
     "-n", "worker@%h", "--loglevel", "INFO", \
     "--without-gossip", "--without-mingle", "--without-heartbeat"]
