"""The Celery app of the worker process: Redis broker and result backend, JSON only.

``celery -A worker.app worker`` reads the broker from ``STAMPEDE_BROKER_URL``. The coordinator
does not import this module: it sends tasks by the names in ``model.wire``.
"""

from __future__ import annotations

import os

from celery import Celery

from model.wire import CELERY_SETTINGS


def make_app(broker_url: str) -> Celery:
    """An app with the shared settings of ``model.wire`` (the coordinator builds the same)."""
    app = Celery("stampede", broker=broker_url, backend=broker_url)
    app.conf.update(CELERY_SETTINGS)
    return app


app = make_app(os.environ.get("STAMPEDE_BROKER_URL", "redis://127.0.0.1:6379/0"))
app.conf.imports = ["worker.tasks"]
