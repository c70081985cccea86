"""Lost workers (issue 15), found by their silence: a worker process SIGKILLed or SIGSTOPped by PID
from outside the fault injector, mid-trial, in a real ``coordinator launch``.

Two launches (about 50 s together on a quiet 2-core machine):
- embedded stack, the default limit (5 s), ``--on-worker-loss continue``: w3 is SIGKILLed and w1
  paused for 3.2 s, 2 s into trial 1 of 2;
- remote mode (services and workers started here), ``--worker-silence 2 --on-worker-loss fail``:
  r2 is paused for longer than the limit, 1 s into trial 1 of 2.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pytest

from model.services import Services
from results.store import rundir
from tests.conftest import start_worker
from tests.helpers import ROOT, Finished, LineReader, alive, coordinator_argv

SILENCE_S = 5.0  # the default --worker-silence (coordinator.defaults.Timing)
SHORT_PAUSE_S = 3.2  # above half the limit (slow), below it (not lost), with room for a busy host
START = re.compile(r"^trial 1/2 \S+ r1: sent to .* starts in ([\d.]+) s")
HOLD = "origin:lock@1.4+1.2"  # origin queries block from 1.4 to 2.6 s into each trial


@dataclass
class Launch:
    """A ``coordinator launch`` in a subprocess, its stderr lines stamped as they arrive."""

    proc: subprocess.Popen[str]
    err: LineReader

    @classmethod
    def start(cls, *args: str) -> Launch:
        proc = subprocess.Popen(coordinator_argv("launch", *args), cwd=ROOT, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        return cls(proc, LineReader(proc))

    def wait_for(self, pattern: re.Pattern[str], timeout_s: float = 150) -> tuple[int, re.Match[str]]:
        """The first stderr line matching ``pattern``: when it arrived, and the match."""
        return self.err.wait_for(pattern, timeout_s)

    def sleep_into_trial(self, seconds: float) -> None:
        """Sleep until ``seconds`` after trial 1's start instant."""
        self.err.sleep_after(START, seconds, timeout_s=150)

    def finish(self, timeout_s: float = 150) -> tuple[int, str]:
        """The exit code and stdout (the table); stderr stays the reader thread's alone."""
        assert self.proc.stdout is not None
        out = self.proc.stdout.read()
        code = self.proc.wait(timeout_s)
        self.err.join(10)
        return code, out

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # stops its stack like Ctrl-C
            self.proc.wait(30)

    def stderr(self) -> str:
        return self.err.text()


@dataclass
class Outcome(Finished):
    acted_ns: int  # when the test killed / paused the worker
    pids: dict[str, int] = field(default_factory=dict)

    def lost(self) -> dict[str, dict[str, Any]]:
        return {x["worker"]: x for x in self.meta["liveness"]["lost"]}

    def rows(self) -> Any:
        return rundir.requests_dataset(self.out).to_table(columns=["trial", "worker", "client"])


def _outcome(launch: Launch, out: Path, acted_ns: int, pids: dict[str, int]) -> Outcome:
    code, table = launch.finish()
    return Outcome.read(code, table, launch.stderr(), out, acted_ns, pids)


def _resume(pid: int) -> None:
    if alive(pid):
        os.kill(pid, signal.SIGCONT)


# ---- embedded stack: SIGKILL one worker, pause another for less than the limit ----------------

@pytest.fixture(scope="module")
def killed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Outcome]:
    out = tmp_path_factory.mktemp("liveness") / "run"
    # The table lock from 1.4 to 2.6 s holds the first herd's origin calls (1.5 s) in
    # PostgreSQL: w3 is killed with every one of its clients in a call, which PostgreSQL still
    # completes and counts once the lock goes, and whose rows w3 never sends (without it, w3's
    # calls had almost always left in a batch before the kill, and the LOST check went untested).
    launch = Launch.start("--workers", "3", "--clients", "12", "--seconds", "3", "--ttl", "1",
                          "--scale", "20000", "--origin-ms", "2", "--strategies", "naive,lock",
                          "--fault", HOLD, "--out", str(out))
    pids: dict[str, int] = {}
    try:
        _, match = launch.wait_for(re.compile(r"^stack pids: (.*)"))
        pids = {name: int(pid) for name, pid in (kv.split("=") for kv in match.group(1).split())}
        launch.sleep_into_trial(2.0)  # after the first expiry (1.5 s): the herd has been fetched
        acted_ns = time.time_ns()
        os.kill(pids["w3@stampede-local"], signal.SIGKILL)
        os.kill(pids["w1@stampede-local"], signal.SIGSTOP)
        time.sleep(SHORT_PAUSE_S)
        _resume(pids["w1@stampede-local"])
        yield _outcome(launch, out, acted_ns, pids)
    finally:
        _resume(pids.get("w1@stampede-local", 0))
        launch.stop()


def test_a_killed_worker_is_lost_within_the_limit_plus_one_second(killed: Outcome) -> None:
    loss = killed.lost()["w3@stampede-local"]
    assert loss["cause"] == "silent" and loss["trial"] == 1, loss
    after_s = (loss["at_ns"] - killed.acted_ns) / 1e9
    # silence counts from the last beat heard, at most a beat (0.5 s) and a poll before the kill
    assert SILENCE_S - 1.0 <= after_s <= SILENCE_S + 1.0, after_s
    assert "trial 1/2 naive r1: worker w3@stampede-local lost: silent" in killed.stderr, killed.stderr


def test_the_trial_is_incomplete_with_the_survivors_rows(killed: Outcome) -> None:
    first = killed.trials[0]
    assert not first["complete"] and first["workers"] == 3 and first["workers_lost"] == 1
    assert "w3@stampede-local: lost: silent" in first["lost_workers"]
    rows = rundir.requests_dataset(killed.out).to_table(
        columns=["trial", "worker", "t_start_ns"], filter=pc.field("trial") == 1)
    assert set(rows["worker"].to_pylist()) == {f"w{i}@stampede-local" for i in (1, 2, 3)}
    w3 = rows.filter(pc.equal(rows["worker"], "w3@stampede-local"))["t_start_ns"]
    # w3's rows up to its last batch (every 0.5 s) before the SIGKILL are kept, none after it
    assert pc.max(w3).as_py() < killed.acted_ns and killed.acted_ns - pc.max(w3).as_py() < 1.5e9
    assert first["batches_missing"] == 0  # it sent no end marker: nothing counted to miss


def test_the_lost_workers_calls_are_told_apart_from_a_miscount(killed: Outcome) -> None:
    """w3's calls held in PostgreSQL at its kill were counted there and never arrived as rows:
    the db check says LOST (not MISMATCH) and why. The pair: trial 2, the same hold and no
    worker lost, matches."""
    first, second = killed.trials
    assert first["db_calls"] > first["origin_calls_total"], first
    assert not first["db_calls_match"] and first["workers_lost"] == 1
    line = next(ln for ln in killed.table.splitlines() if ln.startswith("naive "))
    assert f"LOST {first['origin_calls_total']}≠{first['db_calls']}" in line, killed.table
    assert "after their last batch, whose rows never arrived" in killed.table
    assert second["db_calls"] == second["origin_calls_total"] and second["db_calls_match"], second
    assert second["workers_lost"] == 0 and second["origin_calls_total"] > 0
    lock = next(ln for ln in killed.table.splitlines() if ln.startswith("lock "))
    assert "LOST" not in lock and "MISMATCH" not in lock, killed.table


def test_the_next_trial_runs_on_the_survivors_with_the_clients_re_split(killed: Outcome) -> None:
    second = killed.trials[1]
    assert second["complete"] and second["workers"] == 2 and second["clients"] == 12
    record = killed.meta["trials"][1]
    assert record["dispatched"] == ["w1@stampede-local", "w2@stampede-local"]
    assert record["clients_per_worker"] == [6, 6]
    rows = killed.rows().filter(pc.field("trial") == 2)
    assert set(rows["worker"].to_pylist()) == {"w1@stampede-local", "w2@stampede-local"}
    assert set(rows["client"].to_pylist()) >= set(range(12))  # every client ran (writers: < 0)


def test_a_worker_paused_shorter_than_the_limit_is_slow_not_lost(killed: Outcome) -> None:
    assert "w1@stampede-local" not in killed.lost()
    (slow,) = [s for s in killed.meta["liveness"]["slow"] if s["worker"] == "w1@stampede-local"]
    assert SILENCE_S / 2 < slow["longest_silence_s"] < SILENCE_S and slow["trial"] == 1
    assert "w1@stampede-local: silent up to" in killed.trials[0]["slow_workers"]
    assert "slow, not lost: w1@stampede-local" in killed.table


def test_the_run_says_degraded_in_run_json_the_table_and_the_exit_code(killed: Outcome) -> None:
    assert killed.code == 3, killed.stderr[-2000:]
    assert killed.meta["status"] == "degraded"
    assert killed.meta["liveness"]["active"] == ["w1@stampede-local", "w2@stampede-local"]
    assert "2/3 lost 1" in killed.table  # the workers column of naive's line
    assert "incomplete: 1 of 3 workers lost" in killed.table
    assert "continuing on 2 workers" in killed.stderr
    assert killed.stderr.rstrip().splitlines()[-1].startswith("coordinator: run degraded: 1 worker lost")
    assert [p for p in killed.pids.values() if alive(p)] == []  # the stack stopped, nothing left


def test_the_progress_line_keeps_the_trials_figures_after_its_end(killed: Outcome) -> None:
    ended = [ln for ln in killed.stderr.splitlines() if "(ended; waiting for" in ln]
    assert ended and not [ln for ln in ended if re.search(r"\s0 rps (sent|written)", ln)], ended
    assert all("rps sent" in ln for ln in ended), ended  # the workers' own rate, from their beats
    assert len(ended) <= 5  # at most the silence limit's worth of lines (one each 2 s)


# ---- remote mode: pause a worker for longer than the limit, --on-worker-loss fail -------------

@pytest.fixture(scope="module")
def remote(redis_server: Callable[[str], str], postgres_dsn: str,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Services, dict[str, int]]]:
    services = Services(redis_server("liveness-cache"), redis_server("liveness-locks"),
                        redis_server("liveness-broker"), postgres_dsn)
    logs = tmp_path_factory.mktemp("liveness-workers")
    workers = [start_worker(f"r{i}@liveness", services, logs / f"r{i}.log") for i in (1, 2)]
    try:
        yield services, {w.name: w.pid for w in workers}
    finally:
        for worker in workers:
            _resume(worker.pid)
            worker.stop()


def test_remote_worker_paused_past_the_limit_is_lost_and_fail_stops_the_run(
        remote: tuple[Services, dict[str, int]], tmp_path: Path) -> None:
    services, pids = remote
    out = tmp_path / "run"
    launch = Launch.start("--workers", "2", "--clients", "8", "--seconds", "3", "--ttl", "1",
                          "--strategies", "naive,lock", "--worker-silence", "2",
                          "--on-worker-loss", "fail", "--no-seed", "--out", str(out),
                          f"--cache-url={services.cache_url}", f"--lock-url={services.lock_url}",
                          f"--broker-url={services.broker_url}", f"--origin-dsn={services.origin_dsn}")
    try:
        launch.sleep_into_trial(1.0)
        acted_ns = time.time_ns()
        os.kill(pids["r2@liveness"], signal.SIGSTOP)  # held until the run has stopped
        done = _outcome(launch, out, acted_ns, pids)
    finally:
        _resume(pids["r2@liveness"])
        launch.stop()
    assert done.code == 3, done.stderr[-2000:]
    assert "coordinator: stopped (--on-worker-loss fail): 1 worker lost" in done.stderr
    loss = done.lost()["r2@liveness"]
    assert loss["cause"] == "silent" and 1.0 <= (loss["at_ns"] - acted_ns) / 1e9 <= 3.0, loss
    assert done.meta["status"] == "incomplete" and done.meta["liveness"]["on_worker_loss"] == "fail"
    (first,) = done.trials  # trial 2 never ran
    assert not first["complete"] and "r2@liveness: lost: silent" in first["lost_workers"]
    rows = rundir.requests_dataset(out).to_table(columns=["worker", "t_start_ns"])
    assert set(rows["worker"].to_pylist()) == {"r1@liveness", "r2@liveness"}  # r2 up to the pause
    paused = rows.filter(pc.equal(rows["worker"], "r2@liveness"))["t_start_ns"]
    assert pc.max(paused).as_py() < acted_ns
    assert "1/2 lost 1" in done.table  # the completed trial's table is still printed
