"""Ctrl-C (SIGINT) and SIGTERM mid-trial, each sent to the coordinator's PID alone: exit 130,
completed trials readable, run incomplete, no process of the launch left (the stack's servers
and workers, and the coordinator's own children such as the expiry listener)."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from results.store import rundir
from tests.helpers import ROOT, alive, coordinator_argv, stack_pids


def descendants(pid: int) -> set[int]:
    """Every process below ``pid`` now (from /proc)."""
    parent: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # gone meanwhile
            continue
        parent[int(stat.parent.name)] = int(fields[1])
    found, todo = set(), [pid]
    while todo:
        below = todo.pop()
        children = [child for child, ppid in parent.items() if ppid == below]
        found.update(children)
        todo.extend(children)
    return found


def running(pid: int) -> bool:
    """Alive and not a zombie (an exited orphan, such as multiprocessing's resource tracker,
    waits for init to reap it)."""
    try:
        return alive(pid) and Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@contextlib.contextmanager
def at_a_terminal() -> Iterator[None]:
    """Start the coordinator with Ctrl-C as a terminal's foreground job has it. A background job
    of a shell without job control (``(make test &)``) ignores SIGINT, its children inherit an
    ignored signal across exec, and Python then never installs its KeyboardInterrupt handler:
    the coordinator finished its run with exit 0 (seen twice in a CI started that way, and red
    again under ``trap "" INT``). A handled signal is reset to the default across exec, so the
    test handles it while it starts the coordinator."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_signal_mid_trial_stops_everything(tmp_path: Path, signum: signal.Signals) -> None:
    out = tmp_path / "run"
    with at_a_terminal():
        proc = subprocess.Popen(
            coordinator_argv("launch", "--workers", "2", "--clients", "8", "--seconds", "4",
                             "--ttl", "0.5", "--scale", "5000", "--strategies", "naive,lock",
                             "--out", str(out)),
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stderr.readline, "")),  # type: ignore[union-attr]
                              daemon=True)
    reader.start()
    deadline = time.monotonic() + 120
    while not any("trial 1/2" in ln and "origin calls/expiry" in ln for ln in lines):
        assert proc.poll() is None and time.monotonic() < deadline, "".join(lines)
        time.sleep(0.1)
    time.sleep(2.0)  # trial 2 is running now
    started = descendants(proc.pid)
    proc.send_signal(signum)
    t0 = time.monotonic()
    code = proc.wait(timeout=30)
    assert code == 130, "".join(lines)
    assert time.monotonic() - t0 < 15  # a few seconds, not a hang
    reader.join(5)
    assert "coordinator: interrupted; completed trials are kept" in "".join(lines)
    pids = stack_pids("".join(lines))
    assert len(pids) == 6, lines  # 3 redis, postgres, 2 workers
    assert set(pids) <= started
    time.sleep(1)
    assert [p for p in started if running(p)] == []
    assert rundir.read_meta(out)["status"] == "incomplete"
    trials = rundir.read_trials(out).to_pylist()
    assert [t["trial"] for t in trials] == [1] and trials[0]["requests"] > 0
    assert rundir.requests_dataset(out).count_rows() >= trials[0]["requests"]


def test_a_killed_coordinator_takes_its_whole_stack_with_it(tmp_path: Path) -> None:
    """SIGKILL (the OOM killer, a CI timeout): no ``finally`` runs in the coordinator, yet within
    seconds nothing it started is left (its reaper kills the stack's process groups, the expiry
    listener sees itself orphaned) and the stack's temporary directory is gone."""
    proc = subprocess.Popen(
        coordinator_argv("launch", "--workers", "2", "--clients", "8", "--seconds", "6",
                         "--ttl", "0.5", "--scale", "5000", "--strategies", "naive",
                         "--out", str(tmp_path / "run")),
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stderr.readline, "")),  # type: ignore[union-attr]
                              daemon=True)
    reader.start()
    deadline = time.monotonic() + 120
    while not any("trial 1/1" in ln and " rps " in ln for ln in lines):  # mid-trial
        assert proc.poll() is None and time.monotonic() < deadline, "".join(lines)
        time.sleep(0.1)
    started = descendants(proc.pid)
    work_area = Path(next(ln for ln in lines if ln.startswith("stack: work area ")).split()[-1])
    assert work_area.is_dir() and len(started) >= 8  # the stack, the listener, the reaper
    proc.kill()
    proc.wait(10)
    deadline = time.monotonic() + 10
    while [p for p in started if running(p)] and time.monotonic() < deadline:
        time.sleep(0.2)
    assert [p for p in started if running(p)] == [], "".join(lines)
    assert time.monotonic() < deadline and not work_area.exists()
