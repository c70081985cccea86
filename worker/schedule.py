"""Pure scheduling math: choice tables, stage boundaries, open-loop arrival instants.

Everything the request loop needs is precomputed here, so a request costs a few list lookups:
``table[j]`` with ``j = n & MASK`` for the endpoint, the key and the bypass draw.
"""

from __future__ import annotations

import bisect
import itertools
import random
from array import array
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from model.workload import KeyKind, KeySet

TABLE_BITS = 17
TABLE_SIZE = 1 << TABLE_BITS
MASK = TABLE_SIZE - 1


def key_table(keys: KeySet, rng: random.Random, size: int = TABLE_SIZE) -> array[int]:
    """``size`` key indices drawn from the key set's popularity (index 0 is the hottest)."""
    if keys.kind is KeyKind.HOT:
        return array("i", bytes(4 * size))
    if keys.kind is KeyKind.MANY:
        return array("i", (rng.randrange(keys.count) for _ in range(size)))
    cum = list(itertools.accumulate(1.0 / (rank + 1) ** keys.exponent for rank in range(keys.count)))
    return array("i", rng.choices(range(keys.count), cum_weights=cum, k=size))


def weighted_table(weights: Sequence[float], rng: random.Random, size: int = TABLE_SIZE) -> array[int]:
    """Indices in exact proportion to ``weights`` (largest remainder), shuffled."""
    if len(weights) == 1:
        return array("b", bytes(size))
    total = sum(weights)
    exact = [w / total * size for w in weights]
    counts = [int(x) for x in exact]
    by_remainder = sorted(range(len(weights)), key=lambda i: counts[i] - exact[i])
    for i in by_remainder[: size - sum(counts)]:
        counts[i] += 1
    table = np.repeat(np.arange(len(weights), dtype=np.int8), counts)
    return array("b", _shuffled(table, rng).tobytes())


def uniform_table(rng: random.Random, size: int = TABLE_SIZE) -> array[float]:
    """Stratified draws in [0, 1): ``u < p`` holds for exactly ``round(p * size)`` entries."""
    values = (np.arange(size, dtype=np.float64) + 0.5) / size
    return array("d", _shuffled(values, rng).tobytes())


def _shuffled(values: np.ndarray, rng: random.Random) -> np.ndarray:
    """A permutation drawn from ``rng`` (numpy's shuffle: milliseconds, not a tenth of a second,
    for a table of 2**17, which a worker builds while the start instant approaches)."""
    return np.random.default_rng(rng.getrandbits(64)).permutation(values)


@dataclass(frozen=True)
class Stages:
    """Stage ``s`` covers [start + s * length, start + (s + 1) * length); the last one runs on.

    Before ``start`` (the warm-up) the stage is -1.
    """

    start_ns: int
    length_ns: int
    count: int

    def at(self, t_ns: int) -> int:
        if t_ns < self.start_ns:
            return -1
        if self.length_ns <= 0:
            return 0
        return min((t_ns - self.start_ns) // self.length_ns, self.count - 1)

    def bounds(self, stage: int) -> tuple[int, int]:
        """[start, end) of a stage (the last one's end is open: returned as start + length)."""
        begin = self.start_ns + stage * self.length_ns
        return begin, begin + self.length_ns


@dataclass(frozen=True)
class Segment:
    """Arrivals at a constant total rate from ``start_ns`` for ``count`` global sends."""

    start_ns: int
    rate: float
    count: int


class Arrivals:
    """Intended send instants of one worker's share of a total, staged arrival rate.

    Globally, segment ``g`` sends at ``start + j / rate`` for ``j`` in ``[0, count)``; worker
    ``w`` of ``W`` takes every ``j`` with ``j % W == w``, so the workers interleave and their
    sum is the total rate. A worker's sends are numbered ``k = 0, 1, ...`` across segments;
    ``instant(k)`` is None after the last one.
    """

    def __init__(self, segments: Sequence[Segment], worker: int, workers: int) -> None:
        self.segments = tuple(segments)
        self.worker, self.workers = worker, workers
        firsts, total = [], 0
        for seg in self.segments:
            firsts.append(total)
            total += self.share(seg.count)
        self._firsts = firsts
        self.total = total

    def share(self, count: int) -> int:
        """How many of ``count`` global sends fall to this worker."""
        return max(0, -(-(count - self.worker) // self.workers))

    def slot(self, k: int) -> int:
        """The table index of the worker's k-th send (endpoint, key and bypass draw)."""
        return k & MASK

    def instant(self, k: int) -> int | None:
        if k >= self.total:
            return None
        g = bisect.bisect_right(self._firsts, k) - 1
        seg = self.segments[g]
        j = self.worker + (k - self._firsts[g]) * self.workers
        return seg.start_ns + round(j * 1e9 / seg.rate)


def segments(start_ns: int, end_ns: int, stages: Stages, rates: Sequence[float]) -> list[Segment]:
    """The arrival segments of a trial: warm-up at the first stage's rate, then one per stage."""
    edges = [start_ns] + [stages.bounds(s)[0] for s in range(stages.count)] + [end_ns]
    edges = [min(max(e, start_ns), end_ns) for e in edges]
    out = []
    for i, rate in enumerate([rates[0], *rates]):
        t0, t1 = edges[i], edges[i + 1]
        if t1 > t0:
            out.append(Segment(t0, rate, int((t1 - t0) * rate // 1e9)))
    return out
