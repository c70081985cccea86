"""The embedded stack's app tier: one granian (WSGI) with N app processes on a loopback port,
each hosting the strategies (app/), as a real service runs them (``python -m app``).

Readiness: the tier answers ``/stampede/health``; the coordinator then waits for the N processes'
beats (coordinator.app_tier). Another count (``--app-servers 1,2,4``): the tier is started again
on the same port, so an HTTP cache in front keeps its upstream.
"""

from __future__ import annotations

import os
import signal
import sys
import urllib.request
from pathlib import Path

from coordinator.stack.processes import ManagedProcess, free_port
from model import apptier
from model.services import OPTIONAL_ENV, Services

START_TIMEOUT_S = 90.0


def app_argv() -> list[str]:
    """The command an app tier runs here, in the image and on Kubernetes (env: the services,
    STAMPEDE_APP_PROCESSES, STAMPEDE_APP_THREADS, STAMPEDE_APP_BIND)."""
    return [sys.executable, "-m", "app"]


def start_app_tier(processes: int, threads: int, services: Services, workdir: Path,
                   port: int | None = None, kind: str = "wsgi") -> tuple[ManagedProcess, str]:
    """Start the tier (on ``port``, else a free one) of app ``kind`` (wsgi: granian; asgi:
    uvicorn, app/asgi.py); return it and its URL once it answers."""
    port = port or free_port()
    inherited = {k: v for k, v in os.environ.items() if k not in OPTIONAL_ENV.values()}
    env = {**inherited, **services.to_env(), "PYTHONUNBUFFERED": "1",
           apptier.APP_ENV["processes"]: str(processes), apptier.APP_ENV["threads"]: str(threads),
           apptier.APP_ENV["bind"]: f"127.0.0.1:{port}", apptier.APP_ENV["kind"]: kind,
           "MALLOC_ARENA_MAX": "2"}
    proc = ManagedProcess("app-tier", app_argv(), workdir / "app-tier.log", env=env,
                          stop_signal=signal.SIGTERM, stop_timeout_s=8.0)
    url = f"http://127.0.0.1:{port}"
    proc.ready_or_stopped(lambda: _answers(url), START_TIMEOUT_S, "answering HTTP")
    return proc, url


def _answers(url: str) -> bool:
    with urllib.request.urlopen(url + apptier.HEALTH_PATH, timeout=1) as reply:
        return int(reply.status) == 200
