"""The Celery app: Redis broker and result backend, JSON only (no other serializer accepted).

``celery -A worker.app worker`` reads the broker from ``STAMPEDE_BROKER_URL``; the coordinator
builds its own client app with ``make_app(url)`` and sends tasks by name.
"""

from __future__ import annotations

import os

from celery import Celery

RUN_TRIAL = "stampede.run_trial"
CLOCK = "stampede.clock"
BASELINE = "stampede.baseline"


def make_app(broker_url: str) -> Celery:
    app = Celery("stampede", broker=broker_url, backend=broker_url)
    app.conf.update(
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        result_accept_content=["json"],
        # Each task is sent to one named worker's own queue, so N tasks land on N workers.
        worker_direct=True,
        worker_prefetch_multiplier=1,
        task_acks_late=False,
        result_expires=3600,
        broker_connection_retry_on_startup=True,
        worker_hijack_root_logger=False,
        task_track_started=True,
    )
    return app


app = make_app(os.environ.get("STAMPEDE_BROKER_URL", "redis://127.0.0.1:6379/0"))
app.conf.imports = ["worker.tasks"]
