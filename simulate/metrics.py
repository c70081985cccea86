"""The figures of a simulated trial, by the definitions the measured ones use (BRIEF section 3).

An event here is a herd: origin calls whose starts lie less than half a TTL apart. The model
knows every call, so it needs no server report; a herd whose first call began while the value
was still cached is a refresh cycle (``per`` = refresh), one that began after it expired an
expiry. Only the first K herds count, each whole. Latency percentiles are over every request,
errors included (the hits counted in bulk read from their histogram, ``simulate.latency``).
Across replications each figure is the mean of the replications' figures, its 95 % interval
the project's bootstrap (``results.figures.intervals``) over replications.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from results.figures.intervals import Estimate, bootstrap, quantile
from simulate.latency import Histogram
from strategies.base import Outcome

if TYPE_CHECKING:
    from simulate.world import Recorded

Call = tuple[float, float, bool]  # origin call: start, end, value still cached at its start


@dataclass(frozen=True)
class Herd:
    calls: tuple[Call, ...]

    @property
    def refresh(self) -> bool:
        return self.calls[0][2]


def herds(calls: Sequence[Call], gap_s: float) -> list[Herd]:
    """Origin calls grouped into herds: a new herd begins after ``gap_s`` without a call."""
    out: list[list[Call]] = []
    last = -np.inf
    for call in sorted(calls):
        if call[0] - last >= gap_s or not out:
            out.append([])
        out[-1].append(call)
        last = call[0]
    return [Herd(tuple(h)) for h in out]


def peak_inflight(calls: Sequence[Call]) -> int:
    """The most origin calls running at one instant (an end before a start at a tie)."""
    edges = sorted([(c[0], 1) for c in calls] + [(c[1], -1) for c in calls])
    running = peak = 0
    for _, step in edges:
        running += step
        peak = max(peak, running)
    return peak


@dataclass(frozen=True)
class Figures:
    """One replication's headline figures."""

    origin_per_expiry: float
    herd_max: int
    peak: int
    rps: float
    p50_ms: float
    p99_ms: float
    requests: int
    errors: int
    waits: int
    events: int
    refresh_events: int
    herds: tuple[int, ...] = ()  # each counted herd's origin calls


def figures(rec: Recorded, expiries: int, gap_s: float) -> Figures:
    """``rec``'s figures over its first ``expiries`` herds and all its requests."""
    counted = herds(rec.calls, gap_s)[:expiries]
    sizes = [len(h.calls) for h in counted]
    # requests that ended by the run's end (hits counted in bulk may be counted ahead of it)
    ended = np.asarray(rec.starts) + np.asarray(rec.latencies) <= rec.seconds
    latencies = np.asarray(rec.latencies)[ended]
    outcomes = np.asarray(rec.outcomes)[ended]
    p50, p99, requests = _percentiles(latencies, rec.bulk.ended(rec.seconds))
    return Figures(
        origin_per_expiry=sum(sizes) / len(sizes) if sizes else float("nan"),
        herd_max=max(sizes, default=0),
        peak=peak_inflight([c for h in counted for c in h.calls]),
        rps=requests / rec.seconds if rec.seconds else float("nan"),
        p50_ms=p50, p99_ms=p99, requests=requests,
        errors=int((outcomes == Outcome.ERROR).sum()),
        waits=int((outcomes == Outcome.WAITED).sum()),
        events=len(counted), refresh_events=sum(h.refresh for h in counted),
        herds=tuple(sizes))


def _percentiles(rows_s: np.ndarray, counted: Histogram) -> tuple[float, float, int]:
    """p50 and p99 (ms) and the number of requests: of the rows alone exactly; with hits
    counted in bulk, of the rows and those hits binned together (``simulate.latency``)."""
    if not counted.total:
        if not rows_s.size:
            return math.nan, math.nan, 0
        p50, p99 = np.percentile(rows_s * 1000, [50, 99])
        return float(p50), float(p99), int(rows_s.size)
    counted.add(rows_s)
    p50, p99 = counted.quantiles([0.5, 0.99])
    return p50 * 1000, p99 * 1000, counted.total


def over_replications(runs: Sequence[Figures]) -> dict[str, Estimate]:
    """Each figure's mean over the replications with its 95 % interval (too few: none); the
    herds' p50 and p90 over every replication's events, with order-statistic intervals, as the
    measured table gives them."""
    def est(name: str) -> Estimate:
        return bootstrap(np.asarray([float(getattr(r, name)) for r in runs]),
                         unit="replications")

    found = {name: est(name) for name in ("origin_per_expiry", "herd_max", "rps", "p50_ms",
                                          "p99_ms")}
    pooled = np.asarray([size for r in runs for size in r.herds])  # herds of every replication
    found["herd_median"] = quantile(pooled, 0.5)
    found["herd_p90"] = quantile(pooled, 0.9)
    return found
