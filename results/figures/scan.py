"""Figures of any number of rows in flat memory: the rows are scanned, never held whole.

A ``Source`` gives a trial's (or a run's) rows as record batches, only the columns asked for,
as many times as asked: a Parquet dataset read from disk, or a table in a unit test. Counts and
sums are folded batch by batch. Quantiles are exact, as numpy's and DuckDB's ``quantile_cont``
(linear interpolation between the two neighbouring ranks), in two passes: the first counts the
values per fine bucket (64 per power of two, log-linear), which says in which bucket
each wanted rank falls; the second keeps only the values of those few buckets: counted per value
in a bucket up to ``NARROW`` nanoseconds wide (every bucket of values under 8.4 ms), kept and
sorted at the end in a wider one. Memory is the buckets, a few counts per wanted bucket and the
values of the wide wanted buckets, whatever the number of rows. (Keeping every wanted bucket's
values held 21 % of an all-hit trial's latencies, whose p50 bucket is 4 ns wide: 1.7 GB in the
coordinator after a 3-minute soak of 96 million rows.)
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from results.figures import intervals

Source = Callable[[Sequence[str]], Iterable[pa.RecordBatch]]
BATCH_ROWS = 1 << 20
SUB_BITS = 7  # 64 buckets per power of two above 128: a bucket spans under 2 % of its values
BUCKETS_PER_OCTAVE = 1 << SUB_BITS  # the index stride of one power of two (half of it is used)
_BUCKETS = 64 * BUCKETS_PER_OCTAVE
NARROW = 1 << 16  # a wanted bucket this wide or narrower is counted per value (512 KB at most)


def table_source(table: pa.Table) -> Source:
    """A table already in memory, as a source (tests, and small row sets)."""
    def batches(columns: Sequence[str]) -> Iterator[pa.RecordBatch]:
        kept = [c for c in columns if c in table.column_names]
        yield from table.select(kept).to_batches(max_chunksize=BATCH_ROWS)
    return batches


def plain(batch: pa.RecordBatch | pa.Table) -> pa.Table:
    """A batch as a table with its dictionary-read strings decoded (for table-level code)."""
    table = batch if isinstance(batch, pa.Table) else pa.Table.from_batches([batch])
    fields = [pa.field(f.name, f.type.value_type) if pa.types.is_dictionary(f.type) else f
              for f in table.schema]
    return table.cast(pa.schema(fields))


def dataset_source(dataset: ds.Dataset, where: ds.Expression | None = None) -> Source:
    """Rows of a Parquet dataset (one trial's partition, or a run's), read row group by row
    group: memory holds one row group's columns, however large a file is. (pyarrow's scanner
    read whole files ahead; ``ParquetFile.iter_batches`` held 506 MB of a 32-million-row
    trial's columns at once where ``read_row_group`` holds 69 MB, and is faster.) ``where``
    selects partitions (``trial == N``), nothing finer."""
    names = set(dataset.schema.names)
    dictionaries = _dictionary_columns(dataset)

    def batches(columns: Sequence[str]) -> Iterator[pa.RecordBatch]:
        kept = [c for c in columns if c in names]
        for fragment in dataset.get_fragments(filter=where):
            file = pq.ParquetFile(fragment.path, read_dictionary=dictionaries)
            own = [c for c in kept if c in file.schema_arrow.names]
            partition = ds.get_partition_keys(fragment.partition_expression)
            for group in range(file.num_row_groups):
                table = file.read_row_group(group, columns=own)
                for batch in table.to_batches(max_chunksize=BATCH_ROWS):
                    yield _with_partition(batch, kept, partition)
    return batches


def _dictionary_columns(dataset: ds.Dataset) -> list[str]:
    fmt = getattr(dataset, "format", None)
    options = getattr(fmt, "read_options", None)
    return sorted(getattr(options, "dictionary_columns", None) or [])


def _with_partition(batch: pa.RecordBatch, kept: Sequence[str],
                    partition: dict[str, object]) -> pa.RecordBatch:
    """The batch with the partition columns asked for (``trial``) filled in."""
    missing = [c for c in kept if c not in batch.schema.names and c in partition]
    if not missing:
        return batch
    arrays = [*batch.columns, *(pa.array([partition[c]] * batch.num_rows) for c in missing)]
    return pa.RecordBatch.from_arrays(arrays, names=[*batch.schema.names, *missing])


def buckets(values: np.ndarray) -> np.ndarray:
    """Each value's bucket, in the values' order: below 2**SUB_BITS one per value, then 64 per
    power of two (log-linear, as HdrHistogram); negative values share bucket 0. Exact for values
    below 2**53 (nanoseconds: 104 days): the power of two is read off the float's exponent bits."""
    v = np.maximum(values.astype(np.int64, copy=False), 1)
    exponent = (v.astype(np.float64).view(np.int64) >> 52) - 1023  # floor(log2(v)), v >= 1
    octave = np.maximum(exponent - SUB_BITS + 1, 0)
    return np.asarray(octave * BUCKETS_PER_OCTAVE + (v >> octave) * (values > 0), np.int64)


def bucket_count(group: np.ndarray, bucket: np.ndarray, groups: int) -> np.ndarray:
    """Values per (group, bucket), every group in one bincount: shape (groups, buckets)."""
    return np.bincount(group * _BUCKETS + bucket, minlength=groups * _BUCKETS).reshape(
        groups, _BUCKETS)


def bucket_bounds(bucket: int) -> tuple[int, int]:
    """The values [low, high) of one bucket (the inverse of ``buckets``; bucket 0 holds every
    value below 1)."""
    if bucket == 0:
        return -(2**63), 1
    octave, offset = divmod(bucket, BUCKETS_PER_OCTAVE)
    return offset << octave, (offset + 1) << octave


@dataclass
class _Kept:
    """The second pass's values in one wanted bucket [low, high): counted per value when the
    bucket is narrow (memory: its width, however many values fall in it), else kept, and
    sorted once when a rank is asked."""

    low: int
    high: int
    counts: np.ndarray | None = None
    values: list[np.ndarray] = field(default_factory=list)
    _ordered: np.ndarray | None = None

    @classmethod
    def of(cls, bucket: int) -> _Kept:
        low, high = bucket_bounds(bucket)
        return cls(low, high, np.zeros(high - low, np.int64) if high - low <= NARROW else None)

    def add(self, values: np.ndarray) -> None:
        mine = values[(values >= self.low) & (values < self.high)]
        if self.counts is None:
            self.values.append(mine)
        elif mine.size:
            self.counts += np.bincount(mine - self.low, minlength=self.counts.size)

    def nbytes(self) -> int:
        held = self.values if self.counts is None else [self.counts]
        return sum(a.nbytes for a in held)

    def value(self, offset: int) -> int:
        """The value of rank ``offset`` (0-based) among this bucket's values."""
        if self.counts is not None:
            return self.low + int(np.searchsorted(np.cumsum(self.counts), offset, side="right"))
        if self._ordered is None:
            self._ordered = np.sort(np.concatenate(self.values))
            self.values = [self._ordered]
        return int(self._ordered[offset])


@dataclass
class Quantiles:
    """Exact quantiles ``qs`` of int64 values fed twice: ``count`` every value in a first pass,
    then ``keep`` the same values in a second; ``result`` after both. NaN when no value.

    For each of ``bounded`` the second pass also keeps the two order statistics of its 95 %
    interval (results.figures.intervals.order_ranks: their ranks come from the binomial once
    the first pass has counted the values), so ``intervals`` needs no third scan."""

    qs: Sequence[float]
    bounded: Sequence[float] = ()
    counts: np.ndarray = field(default_factory=lambda: np.zeros(_BUCKETS, np.int64))
    n: int = 0
    peak: int | None = None
    _kept: dict[int, _Kept] = field(default_factory=dict)

    def count(self, values: np.ndarray) -> None:
        if values.size:
            self.add_counts(np.bincount(buckets(values), minlength=_BUCKETS)[:_BUCKETS], values)

    def add_counts(self, counts: np.ndarray, values: np.ndarray) -> None:
        """The first pass, with ``values``' bucket counts already made (``bucket_count``)."""
        if values.size:
            self.counts += counts
            self.n += int(values.size)
            top = int(values.max())
            self.peak = top if self.peak is None else max(self.peak, top)

    def _ranks(self) -> np.ndarray:
        positions = np.asarray([*self.qs, *self.bounded], float) * (self.n - 1)
        bounds = [r for q in self.bounded for r in intervals.order_ranks(self.n, q) or ()]
        return np.unique(np.concatenate([np.floor(positions), np.ceil(positions),
                                         np.asarray(bounds, float)]).astype(np.int64))

    def keep(self, values: np.ndarray) -> None:
        if not self.n or not values.size:
            return
        if not self._kept:
            wanted = np.searchsorted(np.cumsum(self.counts), self._ranks(), side="right")
            self._kept = {b: _Kept.of(b) for b in np.unique(wanted).tolist()}
        for kept in self._kept.values():
            kept.add(values)

    def held_bytes(self) -> int:
        """What the second pass holds: the wanted buckets' counts and kept values."""
        return sum(kept.nbytes() for kept in self._kept.values())

    def _at(self, rank: int) -> float:
        """The value of global rank ``rank`` (a rank the second pass kept)."""
        below = np.concatenate([[0], np.cumsum(self.counts)])
        bucket = int(np.searchsorted(below, rank, side="right")) - 1
        return float(self._kept[bucket].value(rank - int(below[bucket])))

    def result(self) -> list[float]:
        """The quantiles in the values' unit (NaN for none)."""
        return [self._value(q) for q in self.qs]

    def _value(self, q: float) -> float:
        if not self.n:
            return float("nan")
        position = q * (self.n - 1)
        lo, hi = int(np.floor(position)), int(np.ceil(position))
        a, b = self._at(lo), self._at(hi)
        return a + (b - a) * (position - lo)

    def result_ms(self) -> list[float]:
        return [v / 1e6 for v in self.result()]

    def estimates_ms(self) -> list[intervals.Estimate]:
        """Each of ``bounded`` in ms with its order-statistic interval (NaN ends: too few)."""
        out = []
        for q in self.bounded:
            value = self._value(q)
            ranks = intervals.order_ranks(self.n, q) if self.n >= intervals.fewest_for(q) else None
            lo, hi = (self._at(ranks[0]), self._at(ranks[1])) if ranks else (float("nan"),) * 2
            out.append(intervals.Estimate(value / 1e6, lo / 1e6, hi / 1e6, self.n, "requests",
                                          intervals.fewest_for(q)))
        return out


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
