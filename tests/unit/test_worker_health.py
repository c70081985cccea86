"""worker/health.py, the worker healthcheck (compose, k8s): a beat file and its age (pure)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from worker import health


def test_a_fresh_beat_is_healthy_a_stale_or_missing_one_says_why(tmp_path: Path) -> None:
    beat = tmp_path / "alive"
    assert "does not exist" in str(health.check(beat, 10))
    beat.touch()
    now = beat.stat().st_mtime
    assert health.check(beat, 10, now=now + 9.5) is None
    assert "stopped beating" in str(health.check(beat, 10, now=now + 10.5))


def test_the_probe_exit_codes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                              capsys: pytest.CaptureFixture[str]) -> None:
    beat = tmp_path / "alive"
    monkeypatch.delenv(health.FILE_ENV, raising=False)
    assert health.main() == 2 and f"{health.FILE_ENV} is not set" in capsys.readouterr().err
    monkeypatch.setenv(health.FILE_ENV, str(beat))
    assert health.main() == 1 and "unhealthy" in capsys.readouterr().err
    beat.touch()
    assert health.main() == 0
    os.utime(beat, (time.time() - 30, time.time() - 30))
    assert health.main() == 1
    monkeypatch.setenv(health.MAX_AGE_ENV, "60")
    assert health.main() == 0
    monkeypatch.setenv(health.MAX_AGE_ENV, "soon")
    capsys.readouterr()
    assert health.main() == 2 and capsys.readouterr().err.count("\n") == 1
