"""A real Celery worker under hostile task messages, and credentials masked end to end."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from celery.utils import worker_direct

from coordinator.dispatch import client_app, wait_for_workers
from coordinator.stack.celery_workers import worker_argv
from coordinator.stack.processes import ManagedProcess
from coordinator.stack.redis_server import start_redis
from model.services import Services
from model.wire import CLOCK, RUN_TRIAL

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parent.parent
SECRET = "s3cr3t-Pa55"


def start_worker(name: str, services: Services, log: Path) -> ManagedProcess:
    env = {**os.environ, **services.to_env(), "PYTHONUNBUFFERED": "1"}
    return ManagedProcess(name, worker_argv(name), log, env=env, stop_signal=signal.SIGQUIT,
                          stop_timeout_s=3.0)


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory, postgres_dsn: str,
            ) -> Iterator[tuple[Services, ManagedProcess]]:
    """One password-protected Redis (cache db 0, lock store db 1, broker db 2) and a worker."""
    workdir = tmp_path_factory.mktemp("secured")
    proc, url = start_redis("secured", workdir, password=SECRET)
    base = url.rsplit("/", 1)[0]
    services = Services(f"{base}/0", f"{base}/1", f"{base}/2", postgres_dsn)
    worker = start_worker("h1@stampede-test", services, workdir / "worker.log")
    try:
        yield services, worker
    finally:
        worker.stop()
        proc.stop()


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


def test_credentials_masked_everywhere(secured: tuple[Services, ManagedProcess],
                                       tmp_path: Path) -> None:
    services, worker = secured
    out = tmp_path / "run"
    argv = [sys.executable, "-m", "coordinator", "launch", "--workers", "1", "--clients", "2",
            "--seconds", "3", "--ttl", "0.5", "--strategies", "naive,lock", "--no-seed",
            "--out", str(out), "--cache-url", services.cache_url, "--lock-url", services.lock_url,
            "--broker-url", services.broker_url, "--origin-dsn", services.origin_dsn]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    report = subprocess.run([sys.executable, "-m", "coordinator", "report", str(out)], cwd=ROOT,
                            capture_output=True, text=True, timeout=60, check=False)
    run_json = (out / "run.json").read_text()
    assert "***" in run_json
    for text in (run_json, done.stdout, done.stderr, report.stdout, report.stderr,
                 worker.log_path.read_text()):
        assert SECRET not in text


def test_wrong_password_is_bad_input(secured: tuple[Services, ManagedProcess], tmp_path: Path,
                                     redis_server: Callable[[str], str]) -> None:
    services, _ = secured
    wrong = services.cache_url.replace(SECRET, "nope")
    argv = [sys.executable, "-m", "coordinator", "launch", "--out", str(tmp_path / "r"),
            "--cache-url", wrong, "--lock-url", services.lock_url,
            "--broker-url", services.broker_url, "--origin-dsn", services.origin_dsn]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "--cache-url" in done.stderr
    assert "nope" not in done.stderr and SECRET not in done.stderr
