"""Credentials masked end to end: a whole launch on password-protected remote services (the
``secured`` fixture) never shows the password in run.json (its manifest's command line included),
the output, the report or the worker log."""

from __future__ import annotations

from pathlib import Path

import orjson

from coordinator.stack.processes import ManagedProcess
from model.services import Services
from tests.helpers import SECRET, coordinator


def test_credentials_masked_everywhere(secured: tuple[Services, ManagedProcess],
                                       tmp_path: Path) -> None:
    services, worker = secured
    out = tmp_path / "run"
    done = coordinator("launch", "--workers", "1", "--clients", "2", "--seconds", "3", "--ttl", "0.5",
                       "--strategies", "naive,lock", "--no-seed", "--out", str(out),
                       f"--cache-url={services.cache_url}", "--lock-url", services.lock_url,
                       "--broker-url", services.broker_url, "--origin-dsn", services.origin_dsn,
                       timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    report = coordinator("report", str(out), timeout=60)
    run_json = (out / "run.json").read_text()
    assert "***" in run_json
    command = orjson.loads(run_json)["manifest"]["command"]
    assert command[:2] == ["coordinator", "launch"] and "--lock-url" in command
    assert f"--cache-url={services.masked()['cache_url']}" in command
    assert services.masked()["origin_dsn"] in command and "***" in services.masked()["lock_url"]
    assert services.masked()["lock_url"] in command
    for text in (run_json, done.stdout, done.stderr, report.stdout, report.stderr,
                 worker.log_path.read_text()):
        assert SECRET not in text
