"""The window's requests and stale answers per bin: what rps and the stale share are over.

The window (whole TTL periods) is cut into equal bins of whole periods, about a second each
(``bins``); rps is the requests over the bins' seconds and the stale share the stale answers
over the requests, each with its bootstrap interval over the bins (results.figures.intervals):
bins taken as independent. Bins of whole periods hold one expiry's dip each, so they are alike;
bins of one second at a TTL of two would alternate between an expiry and none.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from results.figures import intervals

if TYPE_CHECKING:
    from results.figures.batch import Batch
    from results.figures.metrics import Window


MAX_BINS = 100_000  # a window longer than a day (a hand-made one: a test's "everything") gets longer bins


def bins(span_ns: int, period_ns: int) -> int:
    """How many equal bins the window is cut into: each of whole TTL periods, as many as make
    about a second (one period when the TTL is longer), so every bin holds its share of
    expiries and the bins are alike; without a period, bins of about a second."""
    if span_ns <= 0:
        return 0
    if period_ns <= 0:
        return min(MAX_BINS, max(1, round(span_ns / 1e9)))
    per = max(1, round(1e9 / period_ns))
    return min(MAX_BINS, max(1, round(span_ns / (per * period_ns))))


def bin_unit(period_ns: int) -> str:
    """What one of the ``bins`` is, as a ``too few`` label names it: a TTL period when a period
    lasts about a second or more (each bin is then one period: a 120 s trial at TTL 20 s has 5),
    else about a second of whole periods."""
    return "TTL periods" if period_ns > 0 and round(1e9 / period_ns) <= 1 else "seconds"


@dataclass
class Seconds:
    """The window's requests and stale answers per second (equal bins of about a second)."""

    window: Window
    count: int = field(init=False)
    requests: np.ndarray = field(init=False)
    stale: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.count = bins(self.window.end_ns - self.window.start_ns, self.window.period_ns)
        self.requests = np.zeros(self.count, np.int64)
        self.stale = np.zeros(self.count, np.int64)

    def add(self, b: Batch, win: np.ndarray) -> None:
        span, starts = self.window.end_ns - self.window.start_ns, b.ints("t_start_ns")
        stale = win & b.outcome("stale")
        self.requests += intervals.per_bin(starts[win], self.window.start_ns, span, self.count)
        self.stale += intervals.per_bin(starts[stale], self.window.start_ns, span, self.count)

    def estimates(self) -> tuple[intervals.Estimate, intervals.Estimate]:
        """rps (requests over the bins' seconds) and the stale share (stale over requests)."""
        seconds = np.full(self.count, self.window.seconds / self.count) if self.count else None
        unit = bin_unit(self.window.period_ns)
        rps = intervals.bootstrap(self.requests, seconds, unit=unit)
        return rps, intervals.bootstrap(self.stale, self.requests, unit=unit)
