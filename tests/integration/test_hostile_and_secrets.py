"""A real Celery worker under hostile task messages, and a wrong password is bad input.

Credentials masked through a whole launch on these services: tests/e2e/test_secrets_masked.py.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from celery.utils import worker_direct

from coordinator.stack.processes import ManagedProcess
from coordinator.trials.dispatch import client_app, wait_for_workers
from model.services import Services
from model.wire import CLOCK, RUN_TRIAL
from tests.helpers import SECRET, coordinator


def test_hostile_messages_rejected_worker_keeps_serving(
        secured: tuple[Services, ManagedProcess]) -> None:
    services, worker = secured
    app = client_app(services.broker_url)
    try:
        wait_for_workers(app, 1, 40, lambda _: None)
        queue = worker_direct(worker.name)
        app.send_task(RUN_TRIAL, args=[{"evil": True}], queue=queue, serializer="pickle")
        bad = app.send_task(RUN_TRIAL, args=[{"run_id": "../../etc", "trial": "x"}], queue=queue)
        with pytest.raises(Exception, match=r"missing fields|must be int|run_id"):
            bad.get(timeout=20)
        assert int(app.send_task(CLOCK, queue=queue).get(timeout=20)) > 0  # still serving
    finally:
        app.close()
    log = worker.log_path.read_text()
    assert "untrusted content" in log or "ContentDisallowed" in log, log[-2000:]
    assert "rejected task" in log
    assert worker.alive()
    assert SECRET not in log


def test_wrong_password_is_bad_input(secured: tuple[Services, ManagedProcess], tmp_path: Path,
                                     redis_server: Callable[[str], str]) -> None:
    services, _ = secured
    wrong = services.cache_url.replace(SECRET, "nope")
    done = coordinator("launch", "--out", str(tmp_path / "r"), "--cache-url", wrong,
                       "--lock-url", services.lock_url, "--broker-url", services.broker_url,
                       "--origin-dsn", services.origin_dsn, timeout=30)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "--cache-url" in done.stderr
    assert "nope" not in done.stderr and SECRET not in done.stderr
