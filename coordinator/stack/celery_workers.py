"""Local Celery worker processes for the embedded stack: one solo-pool process per worker."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

from coordinator.stack.processes import ManagedProcess
from model.services import METRICS_ADDR_ENV, METRICS_PORT_ENV, OPTIONAL_ENV, Services

LOCAL_HOST = "stampede-local"
# glibc's malloc arenas per worker process (default 8 per core): with 25 client threads each
# shipping its own rows, every arena kept its peak; 2 took a worker's peak RSS in a minute of
# two-level at full speed from 328 to 304 MB (the GIL serialises the allocations anyway).
MALLOC_ARENAS = "2"


def worker_argv(name: str) -> list[str]:
    return [
        sys.executable, "-m", "celery", "-A", "worker.app", "worker",
        "--pool", "solo", "--concurrency", "1", "-n", name, "--loglevel", "INFO",
        "--without-gossip", "--without-mingle", "--without-heartbeat",
    ]


def start_workers(count: int, services: Services, workdir: Path,
                  metrics_ports: list[int] | None = None) -> list[ManagedProcess]:
    """Start ``count`` workers named ``w1@stampede-local`` ...; readiness is checked by ping.

    Metrics are off unless ``metrics_ports`` gives each worker its port (an inherited
    ``STAMPEDE_METRICS_PORT`` would make every worker claim the same one)."""
    inherited = {k: v for k, v in os.environ.items() if k not in OPTIONAL_ENV.values()}
    base = {**inherited, **services.to_env(), "PYTHONUNBUFFERED": "1",  # only this run's caches
            "MALLOC_ARENA_MAX": inherited.get("MALLOC_ARENA_MAX", MALLOC_ARENAS)}
    base.pop(METRICS_PORT_ENV, None)
    procs = []
    for i in range(1, count + 1):
        name = f"w{i}@{LOCAL_HOST}"
        env = base if metrics_ports is None else {
            **base, METRICS_PORT_ENV: str(metrics_ports[i - 1]), METRICS_ADDR_ENV: "127.0.0.1"}
        # SIGQUIT is Celery's cold shutdown: the embedded stack stops between trials only.
        procs.append(ManagedProcess(name, worker_argv(name), workdir / f"worker-{i}.log",
                                    env=env, stop_signal=signal.SIGQUIT,
                                    stop_timeout_s=3.0))
    return procs
