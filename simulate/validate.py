"""``coordinator simulate --validate``: does the model reproduce what was measured?

Each measured run is rebuilt by ``--from``'s calibration and simulated per strategy, with as
many expiries per replication as the strategy's repeats saw window events together. Why that
count: the measured herd max is the largest herd over all those events pooled
(``results.figures.repeats.herd_max``), so a replication's largest herd must be over as many
herds to be the same figure. The gate is on origin/expiry and herd max: in when the simulated
mean over replications lies in the measured 95 % interval. Latency (p50, p99) is printed
beside, never gated: one trial's latency interval holds another run's a sixth of the time.
A strategy with fewer than ``MIN_REPEATS`` repeats is not gated either: its interval misses
the run-to-run variation, so it says so instead of pretending.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from results.figures import repeats
from results.figures.intervals import Estimate
from results.outputs import verdicts
from results.outputs.text import grid
from results.store import rundir
from simulate import calibrate
from simulate.metrics import over_replications
from simulate.runner import simulate
from simulate.world import WorldSpec
from strategies.registry import InvalidStrategy, parse, strategy_class

MIN_REPEATS = 3
GATED = ("origin_per_expiry", "herd_max")
BESIDE = ("p50_ms", "p99_ms")
LABELS = {"origin_per_expiry": "origin/expiry", "herd_max": "herd max", "p50_ms": "p50 ms",
          "p99_ms": "p99 ms"}
HEAD = ("run", "strategy", "figure", "measured [95 %]", "simulated [95 %]", "in/out")


@dataclass(frozen=True)
class Check:
    """One (run, strategy, figure): the measured estimate, the simulated one, the verdict."""

    run: str
    strategy: str
    figure: str
    measured: Estimate
    simulated: Estimate
    verdict: str  # in, out, not gated (latency), or why there is no measured interval


def verdict(figure: str, measured: Estimate, simulated: float, repeats_n: int) -> str:
    """in / out for a gated figure with a measured interval, else why not."""
    if figure not in GATED:
        return "not gated"
    if repeats_n < MIN_REPEATS:
        return f"no gate: {repeats_n} repeat(s), need {MIN_REPEATS}"
    if not measured.known:
        return f"no gate: {measured.too_few or 'no measured interval'}"
    return "in" if measured.lo <= simulated <= measured.hi else "out"


def measured_estimates(trials: Sequence[Mapping[str, Any]],
                       events: Mapping[int, repeats.TrialEvents]) -> dict[str, Estimate]:
    """The measured figures by the measured readers' own code."""
    found = repeats.strategy_estimates(trials, events)
    found["herd_max"] = repeats.herd_max(trials, events)
    return found


def window_events(trials: Sequence[Mapping[str, Any]],
                  events: Mapping[int, repeats.TrialEvents]) -> int:
    """The strategy's window events over all its repeats (at least one)."""
    counted = [events[int(t["trial"])].calls.size for t in trials if int(t["trial"]) in events]
    return max(1, sum(counted) or int(sum(int(t.get("expiry_events") or 0) for t in trials)))


def check_run(root: Path, replications: int, seed: int) -> list[Check]:
    """Every strategy of the measured run in ``root``, measured against simulated."""
    world = calibrate.from_run(root, WorldSpec(""), set())
    trials = rundir.read_trials(root).to_pylist()
    events = repeats.events_of(rundir.read_expiries(root))
    by_strategy: dict[str, list[dict[str, Any]]] = {}
    for t in trials:
        by_strategy.setdefault(str(t["strategy"]), []).append(t)
    out = []
    for label, rows in by_strategy.items():
        if not modelled(label):
            out.append(Check(root.name, label, "origin_per_expiry", Estimate(math.nan),
                             Estimate(math.nan), "not modelled (logic not in strategies.core)"))
            continue
        spec = replace(world, expiries=window_events(rows, events))
        sim = over_replications(simulate([label], spec, replications, seed)[0].runs)
        measured = measured_estimates(rows, events)
        for figure in (*GATED, *BESIDE):
            out.append(Check(root.name, label, figure, measured[figure], sim[figure],
                             verdict(figure, measured[figure], sim[figure].value, len(rows))))
    return out


def modelled(label: str) -> bool:
    """Whether the model can run the measured strategy (its logic is in strategies.core)."""
    try:
        return bool(getattr(strategy_class(parse(label).name), "sans_io", False))
    except InvalidStrategy:
        return False


def render(checks: Sequence[Check]) -> str:
    """The table, then the count of gated figures inside their measured intervals."""
    rows = [[c.run, c.strategy, LABELS[c.figure], verdicts.cell(c.measured, c.figure),
             verdicts.cell(c.simulated, c.figure), c.verdict] for c in checks]
    gated = [c for c in checks if c.verdict in ("in", "out")]
    inside = sum(c.verdict == "in" for c in gated)
    share = f" ({inside / len(gated):.0%})" if gated else ""
    ungated = sum(c.verdict.startswith(("no gate", "not modelled")) for c in checks)
    summary = (f"validation: {inside} of {len(gated)} gated figures inside the measured 95 % "
               f"interval{share}; {ungated} without a gate (no usable measured interval); "
               "latency printed, not gated")
    return grid(HEAD, rows) + "\n" + summary
