"""The worker healthcheck against a real Celery worker busy with a real trial.

Why the image's healthcheck is ``python -m worker.health`` and not ``celery inspect ping``: the
solo pool runs the trial on the thread that would answer the ping, so during a trial the ping
gets no reply (what compose and k8s saw as "No nodes replied", rc 69), while the beat file the
worker touches from a daemon thread stays fresh.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from celery.utils import worker_direct

from coordinator.trials.dispatch import client_app, wait_for_workers
from model.services import Services
from model.wire import RUN_TRIAL
from tests.conftest import start_worker
from tests.helpers import ROOT, trial_spec
from worker import health

NAME = "hb@health-test"


def probe(beat: Path) -> subprocess.CompletedProcess[str]:
    env = {health.FILE_ENV: str(beat), health.MAX_AGE_ENV: "3", "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, "-m", "worker.health"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=30, check=False)


def wait_for_first_beat(beat: Path, limit_s: float) -> None:
    """The worker answers a ping as soon as it is ready; its beater (a child process that has
    to import Python first) writes the beat file a moment later, longer on a loaded machine."""
    deadline = time.monotonic() + limit_s
    while not beat.exists():
        assert time.monotonic() < deadline, f"no beat file {beat} within {limit_s:g} s"
        time.sleep(0.05)


def test_probe_stays_healthy_during_a_trial_where_ping_gets_no_reply(
        redis_server: Callable[[str], str], postgres_dsn: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    services = Services(redis_server("cache"), redis_server("lock-store"),
                        redis_server("health-broker"), postgres_dsn)
    beat = tmp_path / "alive"
    monkeypatch.setenv(health.FILE_ENV, str(beat))
    worker = start_worker(NAME, services, tmp_path / "worker.log")
    app = client_app(services.broker_url)
    try:
        wait_for_workers(app, 1, 40, lambda _: None)
        wait_for_first_beat(beat, 30.0)  # the beater is a process of its own, started on ready
        assert probe(beat).returncode == 0, probe(beat).stderr
        spec = trial_spec(4, 4.0)
        task = app.send_task(RUN_TRIAL, args=[spec.to_json()], queue=worker_direct(NAME))
        time.sleep((spec.start_ns - time.time_ns()) / 1e9 + 0.5)
        during = []
        while time.time_ns() < spec.end_ns - 1_000_000_000:
            replies = app.control.ping(destination=[NAME], timeout=1.0) or []
            during.append((probe(beat).returncode, bool(replies)))
        task.get(timeout=60)
    finally:
        app.close()
        worker.stop()
    assert len(during) >= 2 and all(code == 0 for code, _ in during), during
    assert not any(answered for _, answered in during), during  # why the ping cannot be the check
    time.sleep(3.5)
    assert probe(beat).returncode == 1  # stopped worker: the beat ends, the probe fails
