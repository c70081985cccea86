"""A soak of a given length (issue 25): memory of every worker and of the coordinator, sampled
each second, while rows stream to Parquet at the generator's full rate.

    python -m bench.soak --seconds 600          # 10 minutes each of two-level and lock-dc
    make bench                                  # a few minutes each (BENCH_SOAK_S)

For each strategy one ``coordinator launch --workers 8`` with one trial of that length and no
think time; RSS read from /proc for the coordinator and each worker (PIDs from its ``stack
pids:`` line). Prints the peak (the figures after the trial included) and when the
coordinator's came, the slope from the
trial's first minute (``settle_s``) to its end (MB per minute, a least-squares line through the samples) and
the rows written per second. Targets: every worker's peak under
300 MB, the coordinator's under 1 GB, slopes under 5 MB/min. It asserts nothing.
"""

from __future__ import annotations

import argparse
import collections
import math
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from results.store.rundir import read_trials

DEFAULT_S = float(os.environ.get("BENCH_SOAK_S", "180"))
STRATEGIES = ("two-level", "lock-dc")
_PIDS = re.compile(r"^stack pids: (.*)")
_SENT = re.compile(r"^trial 1/\d+ .*: sent to .*, starts in ([\d.]+) s")


@dataclass
class Samples:
    """RSS over time per process name: (seconds since start, MB)."""

    series: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    trial_start_s: float = float("nan")  # the trial's start, seconds since the samples began

    def add(self, name: str, at_s: float, mb: float) -> None:
        self.series.setdefault(name, []).append((at_s, mb))

    def peak(self, name: str) -> float:
        return max(mb for _, mb in self.series[name])

    def peak_after_s(self, name: str, seconds: float) -> float:
        """When ``name`` peaked, in seconds after the trial's end (negative: during it): the
        trial's own rows or the figures computed from them after it."""
        at, _ = max(self.series[name], key=lambda sample: sample[1])
        return at - (self.trial_start_s + seconds)

    def slope(self, name: str, seconds: float, after_s: float | None = None) -> float:
        """MB per minute from ``after_s`` into the trial to its end (least squares: the
        figures computed after the trial are in the peak, not in the slope); NaN with too few
        samples."""
        start = self.trial_start_s + (settle_s(seconds) if after_s is None else after_s)
        kept = [(t, mb) for t, mb in self.series[name] if start <= t <= self.trial_start_s + seconds]
        if len(kept) < 10:
            return float("nan")
        t, mb = np.array(kept).T
        return float(np.polyfit(t / 60.0, mb, 1)[0])


def settle_s(seconds: float) -> float:
    """Where the slope starts: the trial's first minute, or its first half when shorter (a
    test's soak of a few seconds)."""
    return min(60.0, seconds / 2)


def rss_mb(pid: int) -> float | None:
    try:
        fields = Path(f"/proc/{pid}/statm").read_text().split()
    except OSError:
        return None
    return int(fields[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


class LaunchLines:
    """Reads the launch's stderr on a thread: the workers' PIDs, the trial's start, the tail."""

    def __init__(self, proc: subprocess.Popen[str], samples: Samples, start: float) -> None:
        self.proc, self.samples, self.start = proc, samples, start
        self.workers: dict[str, int] = {}
        self.said: collections.deque[str] = collections.deque(maxlen=20)
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.said.append(line.rstrip())
            if (sent := _SENT.match(line)) is not None and math.isnan(self.samples.trial_start_s):
                self.samples.trial_start_s = time.monotonic() - self.start + float(sent.group(1))
            if (m := _PIDS.match(line)) is not None:
                pairs = (kv.split("=") for kv in m.group(1).split())
                self.workers.update({n: int(p) for n, p in pairs if n.startswith("w")})


def soak(strategy: str, seconds: float, out: Path, workers: int = 8, clients: int = 200,
         every_s: float = 1.0) -> tuple[Samples, float]:
    """One launch; the samples (every ``every_s``) and the rows written per second of its trial."""
    argv = [sys.executable, "-m", "coordinator", "launch", "--workers", str(workers), "--clients",
            str(clients), "--strategies", strategy, "--ttl", "2", "--seconds", str(seconds),
            "--scale", "200000", "--out", str(out)]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    samples, start = Samples(), time.monotonic()
    lines = LaunchLines(proc, samples, start)
    while proc.poll() is None:
        at = time.monotonic() - start
        for name, pid in [("coordinator", proc.pid), *lines.workers.items()]:
            if (mb := rss_mb(pid)) is not None:
                samples.add(name, at, mb)
        time.sleep(every_s)
    lines.thread.join(5)
    if proc.returncode != 0:
        tail = "\n".join(lines.said)
        raise RuntimeError(f"soak of {strategy} failed (exit {proc.returncode}); its last lines:\n{tail}")
    trial = read_trials(out).to_pylist()[0]
    return samples, float(trial["rows_written"]) / seconds


def report(strategy: str, seconds: float, samples: Samples, rows_per_s: float,
           workers: int = 8, clients: int = 200) -> str:
    names = [n for n in samples.series if n != "coordinator"]
    worst = max(names, key=samples.peak)
    steepest = max(names, key=lambda n: np.nan_to_num(samples.slope(n, seconds)))
    return (f"[7] soak {strategy}, {seconds / 60:.3g} min, {workers} workers x "
            f"{clients // workers} clients: "
            f"{rows_per_s:,.0f} rows written/s; peak RSS worst worker {samples.peak(worst):.0f} MB "
            f"(target < 300), coordinator {samples.peak('coordinator'):.0f} MB (target < 1024) "
            f"at {samples.peak_after_s('coordinator', seconds):+.0f} s from the trial's end; "
            f"slope from {settle_s(seconds):g} s into the trial to its end: workers up to "
            f"{samples.slope(steepest, seconds):+.2f} MB/min, coordinator "
            f"{samples.slope('coordinator', seconds):+.2f} MB/min (target < 5)")


def run(seconds: float = DEFAULT_S, strategies: tuple[str, ...] = STRATEGIES, workers: int = 8,
        clients: int = 200, every_s: float = 1.0) -> list[str]:
    found = []
    with tempfile.TemporaryDirectory(prefix="bench-soak-") as tmp:
        for strategy in strategies:
            samples, rate = soak(strategy, seconds, Path(tmp) / strategy, workers, clients, every_s)
            found.append(report(strategy, seconds, samples, rate, workers, clients))
            print(found[-1], flush=True)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.soak")
    parser.add_argument("--seconds", type=float, default=DEFAULT_S,
                        help=f"length of each soak [default {DEFAULT_S:g}; env BENCH_SOAK_S]")
    parser.add_argument("--strategies", default=",".join(STRATEGIES),
                        help=f"comma-separated, one soak each [default {','.join(STRATEGIES)}]")
    args = parser.parse_args()
    run(args.seconds, tuple(args.strategies.split(",")))


if __name__ == "__main__":
    main()
