"""A service start that never gets ready leaves nothing running (``ready_or_stopped``): every
start-up of the stack and of the tests' own services goes through it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from coordinator.stack.processes import ManagedProcess, StackError


def test_a_start_that_never_gets_ready_is_stopped(tmp_path: Path) -> None:
    proc = ManagedProcess("never-ready", [shutil.which("sleep") or "sleep", "30"],
                          tmp_path / "never.log", stop_timeout_s=2.0)
    with pytest.raises(StackError, match=r"never-ready not answering after 0\.3 s"):
        proc.ready_or_stopped(lambda: False, 0.3, "answering")
    assert not proc.alive()


def test_a_ready_start_keeps_running(tmp_path: Path) -> None:
    proc = ManagedProcess("ready", [shutil.which("sleep") or "sleep", "30"], tmp_path / "r.log")
    try:
        proc.ready_or_stopped(lambda: True, 1.0, "answering")
        assert proc.alive()
    finally:
        proc.stop()
