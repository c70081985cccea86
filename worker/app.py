"""The Celery app of the worker process: Redis broker and result backend, JSON only.

``celery -A worker.app worker`` reads the broker from ``STAMPEDE_BROKER_URL``. The coordinator
does not import this module: it sends tasks by the names in ``model.wire``.
"""

from __future__ import annotations

import os

from celery import Celery
from celery.signals import celeryd_after_setup, worker_ready, worker_shutdown

from model.wire import CELERY_SETTINGS
from worker import health, metrics


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


@worker_ready.connect  # type: ignore[untyped-decorator]
def _start_health_beat(**_: object) -> None:
    """``STAMPEDE_HEALTH_FILE`` set: beat it every second for the healthcheck (worker/health.py)."""
    health.start_from_env()


@worker_shutdown.connect  # type: ignore[untyped-decorator]
def _stop_health_beat(**_: object) -> None:
    health.stop()
