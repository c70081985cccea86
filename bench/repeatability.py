"""Benchmark 6, repeatability: the demo's naive trial N times, and how much its headline moves.

``make bench`` runs it; alone: ``python -m bench.repeatability [N]`` (or ``STAMPEDE_BENCH_RUNS=N``;
default DEFAULT_RUNS). One ``coordinator launch`` of ``make demo``'s options with
``--strategies naive --repeat N`` (the repeats are the runs: the same command, one after the
other, on one stack). It prints each run's origin calls per event with its 95 % interval, then
for each headline figure the coefficient of variation over the runs and how often each run's
interval held the median of the other runs' values (a calibrated interval holds it in about 95 %
of runs when runs differ by their own sampling only; less when the machine changes under them).
"""

from __future__ import annotations

import math
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from results.figures import intervals
from results.store.rundir import read_trials

DEFAULT_RUNS = 5
ENV = "STAMPEDE_BENCH_RUNS"
DEMO = ("--workers", "8", "--seconds", "30")  # make demo's launch (Makefile)
FIGURES = (("origin_per_expiry", "origin/expiry", ".1f"), ("p50_ms", "p50 ms", ".2f"),
           ("p99_ms", "p99 ms", ".1f"), ("rps", "rps", ",.0f"))


class BadRuns(ValueError):
    """N is not a whole number from 2 to 50."""


def runs_from(argv: Sequence[str], env: Mapping[str, str]) -> int:
    """N from the command line, else the environment, else DEFAULT_RUNS."""
    raw = argv[0] if argv else env.get(ENV)
    if raw is None:
        return DEFAULT_RUNS
    try:
        runs = int(raw)
    except ValueError:
        raise BadRuns(f"runs: {raw!r} is not a whole number") from None
    if not 2 <= runs <= 50:
        raise BadRuns(f"runs: {runs} is not from 2 to 50 (a coefficient of variation needs two)")
    return runs


@dataclass(frozen=True)
class Held:
    """One figure over the runs: its coefficient of variation, and in how many runs the run's
    own interval held the median of the others (of how many runs had an interval)."""

    cv: float
    held: int
    of: int


def held(trials: Sequence[Mapping[str, Any]], figure: str) -> Held:
    values = [float(t[figure]) for t in trials]
    inside = of = 0
    for i, t in enumerate(trials):
        lo, hi = t.get(f"{figure}_lo"), t.get(f"{figure}_hi")
        if lo is None or hi is None or not (math.isfinite(lo) and math.isfinite(hi)):
            continue
        of += 1
        inside += lo <= statistics.median(values[:i] + values[i + 1:]) <= hi
    return Held(intervals.spread(values), inside, of)


def lines(trials: Sequence[Mapping[str, Any]], demo: Sequence[str] = DEMO) -> list[str]:
    """The runs' headline with intervals, then the repeatability line of each figure."""
    each = "; ".join(f"{t['origin_per_expiry']:.1f} [{t['origin_per_expiry_lo']:.1f}, "
                     f"{t['origin_per_expiry_hi']:.1f}]" for t in trials)
    out = [f"[6] repeatability, the demo's naive trial {len(trials)} times "
           f"(coordinator launch {' '.join(demo)} --strategies naive --repeat {len(trials)}): "
           f"origin/expiry {each}"]
    for figure, label, _ in FIGURES:
        h = held(trials, figure)
        out.append(f"    {label}: coefficient of variation {h.cv:.1%} over {len(trials)} runs; "
                   f"each run's 95 % interval held the others' median in {h.held} of {h.of}")
    return out


def run(runs: int = DEFAULT_RUNS, demo: Sequence[str] = DEMO) -> list[str]:
    """Launch the demo's naive trial ``runs`` times (``demo``: the launch's options, the demo's
    by default); print and return the lines."""
    with tempfile.TemporaryDirectory(prefix="stampede-repeat-") as scratch:
        out = Path(scratch) / "run"
        done = subprocess.run([sys.executable, "-m", "coordinator", "launch", *demo, "--strategies",
                               "naive", "--repeat", str(runs), "--out", str(out), "--quiet"],
                              capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"the launch failed (exit {done.returncode}): {done.stderr[-2000:]}")
        trials = read_trials(out).to_pylist()
    found = lines(trials, demo)
    print("\n".join(found))
    return found


def main(argv: Sequence[str]) -> int:
    try:
        runs = runs_from(argv, os.environ)
    except BadRuns as exc:
        print(f"python -m bench.repeatability: error: {exc}", file=sys.stderr)
        return 2
    run(runs)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
