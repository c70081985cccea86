"""Ctrl-C (SIGINT) mid-trial: exit 130, completed trials readable, run incomplete, no process left."""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from pathlib import Path

from results import store
from tests.helpers import ROOT, alive, coordinator_argv, stack_pids


def test_sigint_mid_trial_stops_everything(tmp_path: Path) -> None:
    out = tmp_path / "run"
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
    proc.send_signal(signal.SIGINT)
    t0 = time.monotonic()
    code = proc.wait(timeout=30)
    assert code == 130, "".join(lines)
    assert time.monotonic() - t0 < 15  # a few seconds, not a hang
    reader.join(5)
    pids = stack_pids("".join(lines))
    assert len(pids) == 6, lines  # 3 redis, postgres, 2 workers
    time.sleep(1)
    assert [p for p in pids if alive(p)] == []
    assert store.read_meta(out)["status"] == "incomplete"
    trials = store.read_trials(out).to_pylist()
    assert [t["trial"] for t in trials] == [1] and trials[0]["requests"] > 0
    assert store.requests_dataset(out).count_rows() >= trials[0]["requests"]
