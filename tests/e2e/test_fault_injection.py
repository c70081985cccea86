"""Each fault on the real embedded stack: the run finishes, rows are kept, trials are marked.

One embedded stack (2 workers) serves every test; after each run the injector restarts what
the fault killed, so the next test starts from a healthy stack (that is the healing under test).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pytest

from coordinator import faults
from coordinator.cli.options import strategy_list
from coordinator.config import LaunchConfig
from coordinator.console import Console
from coordinator.defaults import Timing
from coordinator.experiment import run_experiment
from coordinator.faults.injector import Injector
from coordinator.stack import EmbeddedStack
from coordinator.trials.dispatch import client_app
from results.store import rundir

TIMING = Timing(lead_s=1.0, warmup_s=0.5, progress_s=0.25, worker_wait_s=40, gather_grace_s=8)


@pytest.fixture(scope="module")
def stack() -> Iterator[EmbeddedStack]:
    with EmbeddedStack(2) as embedded:
        yield embedded


def run(stack: EmbeddedStack, tmp_path: Path, spec: str, strategies: str,
        seconds: float = 3.0) -> tuple[list[dict[str, Any]], dict[str, Any], list[str]]:
    said: list[str] = []
    console = Console()
    console.say = said.append  # type: ignore[method-assign]
    config = LaunchConfig(
        workers=2, clients=8, strategies=strategy_list(None, None, strategies),  # type: ignore[arg-type]
        ttl_s=0.5, seconds=seconds, repeat=1, out=tmp_path / "run", scale=5000,
        origin_target_ms=0.5, timing=TIMING, faults=(faults.parse(spec),),
    )
    faults.check(config.faults, config.seconds)
    writer = rundir.RunWriter.create(config.out)
    injector = Injector(stack, config.faults, config.seconds, said.append)
    app = client_app(stack.services.broker_url)
    try:
        run_experiment(config, stack.services, app, writer, console, injector)
    finally:
        app.close()
        injector.between_trials()  # leave the stack healthy for the next test
    return rundir.read_trials(writer.root).to_pylist(), rundir.read_meta(writer.root), said


def test_lock_store_killed(stack: EmbeddedStack, tmp_path: Path) -> None:
    old_pid = stack.process("lock-store").pid
    trials, meta, said = run(stack, tmp_path, "lock-store:kill@1",
                             "lock:on_lock_error=closed,naive")
    lock, naive = trials
    assert meta["status"] == "complete"
    assert all(t["complete"] and t["fault"] == "lock-store:kill@1" for t in trials)
    assert 0.9 <= lock["fault_at_s"] < 2.5
    assert lock["fault_errors"] > 0 and "LockStoreDown" in lock["error_types"]
    assert naive["fault_errors"] == 0 and naive["fault_requests"] > 0  # naive needs no lock store
    assert any("restarted lock-store" in line for line in said)  # healed before trial 2
    assert stack.process("lock-store").pid != old_pid and stack.process("lock-store").alive()


def test_lock_store_paused_and_resumed(stack: EmbeddedStack, tmp_path: Path) -> None:
    pid = stack.process("lock-store").pid
    trials, meta, said = run(stack, tmp_path, "lock-store:pause@1+1.5", "lock")
    (lock,) = trials
    assert meta["status"] == "complete" and lock["complete"]
    assert lock["max_ms"] >= 1000  # requests in flight stalled while the server was stopped
    assert any("lifted" in line for line in said)
    assert stack.process("lock-store").pid == pid  # resumed, not restarted


def test_cache_killed(stack: EmbeddedStack, tmp_path: Path) -> None:
    trials, meta, _ = run(stack, tmp_path, "cache:kill@1", "naive")
    (naive,) = trials
    assert meta["status"] == "complete" and naive["complete"]
    assert naive["fault_errors"] > 0 and "ConnectionError" in naive["error_types"]
    assert naive["requests"] > naive["errors"]  # the rows before the fault are kept


def test_origin_locked(stack: EmbeddedStack, tmp_path: Path) -> None:
    trials, meta, said = run(stack, tmp_path, "origin:lock@1+1", "naive")
    (naive,) = trials
    assert meta["status"] == "complete" and naive["complete"]
    assert any("ACCESS EXCLUSIVE" in line for line in said)
    assert naive["max_ms"] >= 500  # fills blocked behind the table lock
    assert naive["db_calls_match"]


def test_origin_pool_exhausted(stack: EmbeddedStack, tmp_path: Path) -> None:
    trials, meta, said = run(stack, tmp_path, "origin:exhaust@1+1", "naive")
    (naive,) = trials
    assert meta["status"] == "complete" and naive["complete"]
    assert any("holding" in line and "worker connections" in line and "FAILED" not in line
               for line in said), said
    # Held, not dropped: the fills hang until the lift (1 s), none fails fast, none is lost.
    assert naive["fault_errors"] == 0 and naive["max_ms"] >= 500
    assert naive["db_calls_match"]


def test_worker_killed(stack: EmbeddedStack, tmp_path: Path) -> None:
    trials, meta, said = run(stack, tmp_path, "worker:kill@1", "naive,lock")
    first, second = trials
    assert meta["status"] == "complete"
    assert not first["complete"] and first["workers_lost"] == 1
    assert first["requests"] > 0  # the surviving worker's rows are kept
    assert meta["trials"][0]["missing_workers"] == {"w2@stampede-local": "killed by a fault"}
    assert any("restarted w2@stampede-local" in line for line in said)
    assert not second["complete"] and second["workers_lost"] == 1  # killed again in trial 2
    assert_rows_until_the_kill(tmp_path / "run", meta, "w2@stampede-local")


def assert_rows_until_the_kill(out: Path, meta: dict[str, Any], killed: str) -> None:
    """The killed worker's rows are kept up to its last batch (sent every 0.25 s here), none of
    them started after the kill; the trial's delivery columns say its end never came."""
    rows = rundir.requests_dataset(out).to_table(columns=["trial", "worker", "t_start_ns"])
    first = rows.filter(pc.equal(rows["trial"], 1))
    assert set(first["worker"].to_pylist()) == {"w1@stampede-local", "w2@stampede-local"}
    at_ns = meta["trials"][0]["faults_applied"][0]["at_ns"]
    mine = first.filter(pc.equal(first["worker"], killed))["t_start_ns"]
    assert mine.length() > 0 and pc.max(mine).as_py() < at_ns
    assert at_ns - pc.max(mine).as_py() < 1.5e9  # up to its last batch before the kill


def test_broker_restarted_between_trials(stack: EmbeddedStack, tmp_path: Path) -> None:
    pid = stack.process("broker").pid
    trials, meta, said = run(stack, tmp_path, "broker:restart@3", "naive,lock")
    assert meta["status"] == "complete"
    assert all(t["complete"] and t["requests"] > 0 for t in trials)
    assert any("recovered: restarted broker" in line for line in said)
    assert stack.process("broker").pid != pid


def test_named_worker_killed(stack: EmbeddedStack, tmp_path: Path) -> None:
    trials, _, said = run(stack, tmp_path, "worker:kill:w1@1", "naive")
    (naive,) = trials
    assert naive["fault"] == "worker:kill:w1@1" and naive["workers_lost"] == 1
    assert any("SIGKILL w1@stampede-local" in line for line in said), said
    assert_rows_until_the_kill(tmp_path / "run", rundir.read_meta(tmp_path / "run"),
                               "w1@stampede-local")
