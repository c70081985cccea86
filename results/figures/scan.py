"""Figures of any number of rows in flat memory: the rows are scanned, never held whole.

A ``Source`` gives a trial's (or a run's) rows as record batches, only the columns asked for,
as many times as asked: a Parquet dataset read from disk, or a table in a unit test. Counts and
sums are folded batch by batch. Quantiles are exact, as numpy's and DuckDB's ``quantile_cont``
(linear interpolation between the two neighbouring ranks), in two passes: the first counts the
values per fine bucket (``BUCKETS_PER_OCTAVE`` per power of two), which says in which bucket
each wanted rank falls; the second keeps only the values of those few buckets, sorted at the end.
Memory is the buckets plus the values of the wanted buckets, whatever the number of rows.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds

Source = Callable[[Sequence[str]], Iterable[pa.RecordBatch]]
BATCH_ROWS = 1 << 20
SUB_BITS = 7  # 64 buckets per power of two above 128: a bucket spans under 2 % of its values
BUCKETS_PER_OCTAVE = 1 << SUB_BITS
_BUCKETS = 64 * BUCKETS_PER_OCTAVE


def table_source(table: pa.Table) -> Source:
    """A table already in memory, as a source (tests, and small row sets)."""
    def batches(columns: Sequence[str]) -> Iterator[pa.RecordBatch]:
        kept = [c for c in columns if c in table.column_names]
        yield from table.select(kept).to_batches(max_chunksize=BATCH_ROWS)
    return batches


def dataset_source(dataset: ds.Dataset, where: ds.Expression | None = None) -> Source:
    """Rows of a Parquet dataset (one trial's partition, or a run's), read batch by batch."""
    names = set(dataset.schema.names)

    def batches(columns: Sequence[str]) -> Iterator[pa.RecordBatch]:
        kept = [c for c in columns if c in names]
        yield from dataset.to_batches(columns=kept, filter=where, batch_size=BATCH_ROWS)
    return batches


def buckets(values: np.ndarray) -> np.ndarray:
    """Each value's bucket, in the values' order: below 2**SUB_BITS one per value, then 64 per
    power of two (log-linear, as HdrHistogram); negative values share bucket 0. Exact for values
    below 2**53 (nanoseconds: 104 days)."""
    v = np.maximum(values.astype(np.int64, copy=False), 0)
    octave = np.maximum(np.floor(np.log2(np.maximum(v, 1))).astype(np.int64) - SUB_BITS + 1, 0)
    return octave * BUCKETS_PER_OCTAVE + (v >> octave)


@dataclass
class Quantiles:
    """Exact quantiles ``qs`` of int64 values fed twice: ``count`` every value in a first pass,
    then ``keep`` the same values in a second; ``result`` after both. NaN when no value."""

    qs: Sequence[float]
    counts: np.ndarray = field(default_factory=lambda: np.zeros(_BUCKETS, np.int64))
    n: int = 0
    peak: int | None = None
    _wanted: np.ndarray | None = None
    _kept: list[np.ndarray] = field(default_factory=list)

    def count(self, values: np.ndarray) -> None:
        if values.size:
            self.counts += np.bincount(buckets(values), minlength=_BUCKETS)[:_BUCKETS]
            self.n += int(values.size)
            top = int(values.max())
            self.peak = top if self.peak is None else max(self.peak, top)

    def _ranks(self) -> np.ndarray:
        positions = np.asarray(self.qs, float) * (self.n - 1)
        return np.unique(np.concatenate([np.floor(positions), np.ceil(positions)]).astype(np.int64))

    def keep(self, values: np.ndarray) -> None:
        if not self.n or not values.size:
            return
        if self._wanted is None:
            cumulative = np.cumsum(self.counts)
            self._wanted = np.unique(np.searchsorted(cumulative, self._ranks(), side="right"))
        self._kept.append(values[np.isin(buckets(values), self._wanted)])

    def result(self) -> list[float]:
        """The quantiles in the values' unit (NaN for none)."""
        if not self.n:
            return [float("nan")] * len(self.qs)
        kept = np.sort(np.concatenate(self._kept)) if self._kept else np.zeros(0, np.int64)
        below = np.concatenate([[0], np.cumsum(self.counts)])
        kept_buckets = buckets(kept)
        out = []
        for q in self.qs:
            position = q * (self.n - 1)
            lo, hi = int(np.floor(position)), int(np.ceil(position))
            a, b = _at(kept, below, kept_buckets, lo), _at(kept, below, kept_buckets, hi)
            out.append(a + (b - a) * (position - lo))
        return out

    def result_ms(self) -> list[float]:
        return [v / 1e6 for v in self.result()]


def _at(kept: np.ndarray, below: np.ndarray, kept_buckets: np.ndarray, rank: int) -> float:
    """The value of global rank ``rank``: the kept values are whole buckets, sorted; ``below``
    counts the values in the buckets before each."""
    bucket = int(np.searchsorted(below, rank, side="right")) - 1
    first = int(np.searchsorted(kept_buckets, bucket, side="left"))
    return float(kept[first + rank - int(below[bucket])])


class GroupedQuantiles:
    """``Quantiles`` per group key, fed two passes of (keys, values) arrays."""

    def __init__(self, qs: Sequence[float]) -> None:
        self.qs = qs
        self.groups: dict[Hashable, Quantiles] = {}

    def count(self, key: Hashable, values: np.ndarray) -> None:
        self.groups.setdefault(key, Quantiles(self.qs)).count(values)

    def keep(self, key: Hashable, values: np.ndarray) -> None:
        if key in self.groups:
            self.groups[key].keep(values)

    def results_ms(self) -> Mapping[Hashable, list[float]]:
        return {key: q.result_ms() for key, q in self.groups.items()}


def quantiles_of(source: Source, column: str, qs: Sequence[float],
                 select: Callable[[pa.RecordBatch], np.ndarray] | None = None,
                 columns: Sequence[str] = ()) -> Quantiles:
    """Exact quantiles of one column over the rows ``select`` keeps (a boolean mask per batch;
    all rows when None), in two scans of ``source``."""
    wanted = [column, *columns]
    q = Quantiles(qs)
    for scan in (q.count, q.keep):
        for batch in source(wanted):
            values = np.asarray(batch.column(column).to_numpy(zero_copy_only=False), np.int64)
            scan(values[select(batch)] if select is not None else values)
    return q
