"""The Celery app of the worker process: Redis broker and result backend, JSON only.

``celery -A worker.app worker`` reads the broker from ``STAMPEDE_BROKER_URL``. The coordinator
does not import this module: it sends tasks by the names in ``model.wire``.
"""

from __future__ import annotations

import os
import subprocess

from celery import Celery
from celery.signals import celeryd_after_setup, worker_ready, worker_shutdown

from model.wire import CELERY_SETTINGS
from worker import heartbeat, metrics


def make_app(broker_url: str) -> Celery:
    """An app with the shared settings of ``model.wire`` (the coordinator builds the same)."""
    app = Celery("stampede", broker=broker_url, backend=broker_url)
    app.conf.update(CELERY_SETTINGS)
    return app


app = make_app(os.environ.get("STAMPEDE_BROKER_URL", "redis://127.0.0.1:6379/0"))
app.conf.imports = ["worker.tasks"]


@celeryd_after_setup.connect  # type: ignore[untyped-decorator]
def _serve_metrics(sender: str, **_: object) -> None:
    """``STAMPEDE_METRICS_PORT`` set: serve this worker's metrics, labelled with its node name."""
    metrics.serve_from_env(sender)


_beater: list[subprocess.Popen[bytes]] = []


@worker_ready.connect  # type: ignore[untyped-decorator]
def _start_beater(sender: object = None, **_: object) -> None:
    """The worker's beat, from a process of its own (worker.heartbeat): the liveness the
    coordinator reads, and the health file the container's probe reads (worker.health)."""
    node = str(getattr(sender, "hostname", "") or app.conf.get("worker_name") or os.getpid())
    _beater.append(heartbeat.start(node, app.conf.broker_url))


@worker_shutdown.connect  # type: ignore[untyped-decorator]
def _stop_beater(**_: object) -> None:
    """A shutting-down worker stops beating at once (its probe then fails, as before)."""
    for proc in _beater:
        proc.terminate()
        proc.wait(5)
