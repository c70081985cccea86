"""Helpers shared by the tests of every kind: the coordinator CLI (in a subprocess or in-process),
whether a PID is alive, the stack's PIDs from its log line, a worker's trial arguments, a
launched process's stderr lines read as they arrive, and what a finished launch wrote."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

import pyarrow as pa
import pytest
import redis

from coordinator.cli import main
from model.wire import TrialSpec
from results.store import rundir, transport
from results.store.schema import WIRE_SCHEMA

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


@dataclass
class Finished:
    """A finished ``coordinator launch``: exit code, table, stderr, and what it wrote (run
    directory, run.json, trials)."""

    code: int
    table: str
    stderr: str
    out: Path
    meta: dict[str, Any]
    trials: list[dict[str, Any]]

    @classmethod
    def read(cls, code: int, table: str, stderr: str, out: Path, *extra: Any) -> Self:
        """The launch's figures read back from ``out``; ``extra``: the subclass's own fields."""
        meta = json.loads((out / "run.json").read_text())
        return cls(code, table, stderr, out, meta, rundir.read_trials(out).to_pylist(), *extra)


class LineReader:
    """A process's stderr lines, each stamped (``time.time_ns()``) as a daemon thread reads it."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.lines: list[tuple[int, str]] = []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append((time.time_ns(), line.rstrip("\n")))

    def wait_for(self, pattern: re.Pattern[str], timeout_s: float,
                 missing: str | None = None) -> tuple[int, re.Match[str]]:
        """The first line matching ``pattern``: when it arrived, and the match. The process exiting
        first, or ``timeout_s`` passing, fails the test (``missing`` or "no line matching ...")."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for at_ns, line in list(self.lines):
                if match := pattern.search(line):
                    return at_ns, match
            assert self.proc.poll() is None, self.text()
            time.sleep(0.05)
        raise AssertionError(f"{missing or f'no line matching {pattern.pattern}'}:\n{self.text()}")

    def sleep_after(self, start: re.Pattern[str], seconds: float, timeout_s: float,
                    missing: str | None = None) -> None:
        """Sleep until ``seconds`` after the instant a line matching ``start`` announces: the line's
        arrival plus its first group (``starts in <s> s``)."""
        at_ns, match = self.wait_for(start, timeout_s, missing)
        start_ns = at_ns + round(float(match.group(1)) * 1e9)
        time.sleep(max(0.0, (start_ns - time.time_ns()) / 1e9 + seconds))

    def join(self, timeout_s: float) -> None:
        self.thread.join(timeout_s)

    def text(self) -> str:
        return "\n".join(line for _, line in self.lines)


def sent_rows(broker_url: str, spec: TrialSpec, ended: Collection[int] = (),
              timeout_s: float = 30.0) -> pa.Table:
    """The wire rows a worker's shipper sent to ``spec``'s trial stream, each batch once
    (what the coordinator's gatherer would write), in batch order. ``ended``: the senders whose
    end marker is awaited first (an app process ships after it sees the trial finished, a poll
    and a drain later: a fixed sleep was a race on a loaded machine); one still missing after
    ``timeout_s`` fails the test with the senders that did end."""
    client = redis.Redis.from_url(broker_url)
    key = transport.rows_key(spec.run_id, spec.trial)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            entries = client.xrange(key)
            done = {int(fields[b"w"]) for _, fields in entries if b"end" in fields}
            if set(ended) <= done:
                break
            assert time.monotonic() < deadline, (
                f"senders {sorted(set(ended) - done)} sent no end within {timeout_s:g} s "
                f"(ended: {sorted(done)})")
            time.sleep(0.05)
        client.delete(key)  # read once: the next test of the same trial number starts afresh
    finally:
        client.close()
    batches: dict[tuple[int, int], pa.Table] = {}
    for _, fields in entries:
        if b"data" in fields:
            batches.setdefault((int(fields[b"w"]), int(fields[b"seq"])),
                               transport.decode(fields[b"data"]))
    tables = [batches[k] for k in sorted(batches)]
    return pa.concat_tables(tables) if tables else WIRE_SCHEMA.empty_table()
