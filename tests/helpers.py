"""Helpers shared by the tests of every kind: the coordinator CLI (in a subprocess or in-process),
whether a PID is alive, the stack's PIDs from its log line, and a worker's trial arguments."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from coordinator.cli import main
from model.wire import TrialSpec

ROOT = Path(__file__).resolve().parent.parent
SECRET = "s3cr3t-Pa55"  # the password of the ``secured`` fixture's Redis


def coordinator_argv(*args: str) -> list[str]:
    """The argv of ``coordinator ARGS`` as a user runs it (``python -m coordinator``)."""
    return [sys.executable, "-m", "coordinator", *args]


def coordinator(*args: str, timeout: float = 240, env: Mapping[str, str] | None = None,
                prefix: Sequence[str] = ()) -> subprocess.CompletedProcess[str]:
    """Run ``coordinator ARGS`` in a subprocess from the repository root; never raises on exit code.

    ``prefix`` runs it under another program (e.g. ``ip netns exec NS``).
    """
    return subprocess.run([*prefix, *coordinator_argv(*args)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout, check=False)


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """Run the CLI in-process; return its exit code and what it wrote to stderr."""
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    err = capsys.readouterr().err
    return int(exit_info.value.code or 0), err


def assert_bad_input(code: int, err: str, says: str) -> None:
    """Bad input: exit 2 and one line on stderr that holds ``says``, no traceback."""
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1, err
    assert says in err, err
    assert "Traceback" not in err


def alive(pid: int) -> bool:
    """Whether a process with this PID exists."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def stack_pids(stderr: str) -> list[int]:
    """The PIDs of the embedded stack, from its ``stack pids: name=pid ...`` line(s)."""
    return [int(kv.split("=")[1]) for line in stderr.splitlines() if line.startswith("stack pids:")
            for kv in line.split()[2:]]


def trial_spec(clients: int, seconds: float, *, run_id: str = "t", strategy: str = "naive",
               params: dict[str, object] | None = None, origin_span_s: float = 86400.0,
               **extra: Any) -> TrialSpec:
    """One worker's trial on ``orders:0`` (200 ms TTL) starting 0.3 s from now."""
    start = time.time_ns() + 300_000_000
    return TrialSpec(run_id=run_id, trial=1, repeat=1, strategy=strategy, params=params or {},
                     worker_index=0, client_base=0, clients=clients, keys=["orders:0"],
                     ttl_ms=200, start_ns=start, end_ns=start + int(seconds * 1e9),
                     clock_offset_ns=0, pool_size=2, origin_span_s=origin_span_s, **extra)
