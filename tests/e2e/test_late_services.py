"""The coordinator started before its services, as ``kubectl apply -k`` starts it: it waits.

Remote mode against loopback ports where nothing listens yet; a few seconds later the project's
own Redis servers and PostgreSQL (the embedded stack's code, as the fixtures use) start on those
ports, then a worker. The run must proceed to a real trial, and the wait must have been said.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from coordinator.probe import REPORT_EVERY_S
from coordinator.stack.postgres import start_postgres
from coordinator.stack.processes import ManagedProcess, free_port
from coordinator.stack.redis_server import start_redis
from model.services import Services
from tests.conftest import start_worker
from tests.helpers import ROOT, coordinator_argv


@pytest.fixture
def workdir() -> Iterator[Path]:
    """A directory PostgreSQL's unprivileged user can enter (pytest's tmp_path is 0700)."""
    path = Path(tempfile.mkdtemp(prefix="stampede-late-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _wait_for_text(path: Path, text: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while text not in path.read_text():
        assert time.monotonic() < deadline, f"no {text!r} in {path}:\n{path.read_text()}"
        time.sleep(0.2)


def test_run_proceeds_when_services_come_up_late(workdir: Path) -> None:
    ports = {name: free_port() for name in ("cache", "locks", "broker", "origin")}
    services = Services(f"redis://127.0.0.1:{ports['cache']}/0", f"redis://127.0.0.1:{ports['locks']}/0",
                        f"redis://127.0.0.1:{ports['broker']}/0",
                        f"postgresql://postgres@127.0.0.1:{ports['origin']}/postgres")
    out, err = workdir / "run", workdir / "coordinator.err"
    argv = coordinator_argv(
        "launch", "--workers", "1", "--clients", "8", "--strategies", "naive", "--seconds", "2",
        "--ttl", "0.5", "--seed", "--scale", "20000", "--origin-ms", "0.5", "--out", str(out),
        "--service-timeout", "90", "--worker-timeout", "60")
    started: list[ManagedProcess] = []
    with open(err, "w", encoding="utf-8") as stderr:
        proc = subprocess.Popen(argv, cwd=ROOT, env={**os.environ, **services.to_env()},
                                stdout=subprocess.PIPE, stderr=stderr, text=True)
    try:
        _wait_for_text(err, "waiting for --origin-dsn", 30)
        # Nothing up for longer than the progress period: the wait is said again, with its
        # elapsed time, before anything answers.
        time.sleep(REPORT_EVERY_S + 1.5)
        for name in ("cache", "locks", "broker"):
            started.append(start_redis(name, workdir, port=ports[name])[0])
        started.append(start_postgres(workdir, port=ports["origin"])[0])
        started.append(start_worker("late@stampede-test", services, workdir / "worker.log"))
        stdout, _ = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for managed in reversed(started):
            managed.stop()
    said = err.read_text()
    assert proc.returncode == 0, said[-3000:]
    waits = [line for line in said.splitlines() if line.startswith("waiting for --")]
    for option in ("--cache-url", "--lock-url", "--broker-url", "--origin-dsn"):
        assert any(line.startswith(f"waiting for {option} ") for line in waits), option
    assert all("Connection refused" in line for line in waits), waits
    elapsed = [int(m.group(1)) for line in waits if (m := re.search(r"\((\d+) s of 90 s\)", line))]
    assert len(elapsed) == len(waits) and max(elapsed) >= REPORT_EVERY_S, waits
    trials = pq.read_table(out / "trials.parquet").to_pylist()
    assert [t["strategy"] for t in trials] == ["naive"]
    assert trials[0]["requests"] > 0 and trials[0]["db_calls_match"], trials
    assert "naive" in stdout
