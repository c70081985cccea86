"""Latencies counted, not listed: the hits counted in bulk (``simulate.bulk``) as a histogram.

A world of 1,000 app servers at a million requests per simulated second makes hundreds of
millions of hits; a row each would be gigabytes. The hits counted in bulk are binned instead,
on a log scale whose bins are 0.1 % wide, so a percentile read from them is within 0.05 % of
the exact one and memory stays flat however long the run. A client's last batch stays as
arrays (``Counted``) until its next batch begins: only then is every hit of it surely over, and
the run's end may cut a batch (``figures`` counts the requests that ended by then).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

LO_S = 1e-7  # the first bin's lower edge; anything faster falls in it
LOG_STEP = math.log1p(1e-3)  # each bin 0.1 % wider than the one before
BINS = int(math.log(1e4 / LO_S) / LOG_STEP) + 1  # up to 10,000 s: about 25,300 bins


def bins_of(seconds: np.ndarray) -> np.ndarray:
    """The bin of each latency (seconds)."""
    scaled = np.log(np.maximum(seconds, LO_S) / LO_S) / LOG_STEP
    found: np.ndarray = np.minimum(scaled.astype(np.int64), BINS - 1)
    return found


class Histogram:
    """Latencies (seconds) counted in log bins."""

    def __init__(self, counts: np.ndarray | None = None) -> None:
        self.counts = np.zeros(BINS, np.int64) if counts is None else counts

    @property
    def total(self) -> int:
        return int(self.counts.sum())

    def copy(self) -> Histogram:
        return Histogram(self.counts.copy())

    def add(self, seconds: np.ndarray) -> None:
        if not seconds.size:
            return
        found = bins_of(seconds)
        low = int(found.min())
        counted = np.bincount(found - low)
        self.counts[low:low + counted.size] += counted

    def quantiles(self, qs: Sequence[float]) -> list[float]:
        """Each quantile ``q`` in [0, 1] as ``np.percentile`` takes it (linear between the two
        order statistics around rank q (N - 1)), each order statistic its bin's centre."""
        cumulative = np.cumsum(self.counts)
        n = int(cumulative[-1])
        if not n:
            return [math.nan for _ in qs]
        out = []
        for q in qs:
            rank = q * (n - 1)
            lo, hi = math.floor(rank), math.ceil(rank)
            at = np.searchsorted(cumulative, [lo, hi], side="right")
            values = LO_S * np.exp((at + 0.5) * LOG_STEP)
            out.append(float(values[0] + (values[1] - values[0]) * (rank - lo)))
        return out


class Counted:
    """The hits counted in bulk: a histogram of those surely over, and each client's last batch
    (its hits' ends and latencies) until that client's next batch."""

    def __init__(self) -> None:
        self.done = Histogram()
        self._last: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._clients = 0

    def enrol(self) -> int:
        """A new client's number."""
        self._clients += 1
        return self._clients

    def put(self, client: int, ends: np.ndarray, latencies: np.ndarray) -> None:
        """``client``'s next batch; its batch before it is over (it began after that one)."""
        last = self._last.pop(client, None)
        if last is not None:
            self.done.add(last[1])
        if ends.size:
            self._last[client] = (ends, latencies)

    def ended(self, by_s: float) -> Histogram:
        """Every hit counted here that ended by ``by_s``."""
        out = self.done.copy()
        for ends, latencies in self._last.values():
            out.add(latencies[ends <= by_s])
        return out
