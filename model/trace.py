"""A key trace replayed open loop (``--keys-trace FILE``): the keys of real requests in their
order, at their recorded pace (scaled by ``--trace-speed``) or, without timestamps, at
``--rate``; so real popularity and bursts reach the cache.

The file is CSV or Parquet with a column ``key`` and optionally ``t`` (seconds, any origin) or
``timestamp`` (a timestamp). Requests are sorted by time; the trace loops when the trial is
longer than it (the next pass starts one mean gap after its last request). Worker ``w`` of
``W`` sends requests ``w, w + W, ...``, so together they send the trace once per pass.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

MAX_TRACE = 200_000  # requests: the trace travels in every trial task
TIME_COLUMNS = ("t", "timestamp")


class InvalidTrace(ValueError):
    """A trace file that cannot be replayed (one line: the file and what is wrong)."""


@dataclass(frozen=True)
class Trace:
    """The replay: per request, its key's index in the endpoint's key list and its offset from
    the first request (microseconds; empty: no timestamps, sent at ``rate``)."""

    codes: tuple[int, ...]
    offsets_us: tuple[int, ...] = ()
    speed: float = 1.0  # --trace-speed: 2 plays the recorded pace twice as fast
    rate: float = 0.0  # requests/s in total when the trace has no timestamps

    def __post_init__(self) -> None:
        if not 0 < len(self.codes) <= MAX_TRACE:
            raise InvalidTrace(f"a trace holds 1 to {MAX_TRACE:,} requests, not {len(self.codes):,}")
        if self.offsets_us and len(self.offsets_us) != len(self.codes):
            raise InvalidTrace("a trace has one offset per request")
        if not 0.001 <= self.speed <= 1000:
            raise InvalidTrace(f"--trace-speed {self.speed:g} is outside [0.001, 1000]")
        if not self.offsets_us and not 0.1 <= self.rate <= 1e6:
            raise InvalidTrace("a trace without timestamps is sent at --rate R (requests/s)")

    def offset_us(self, i: int) -> float:
        """Request ``i``'s offset within a pass, at the recorded pace."""
        return self.offsets_us[i] if self.offsets_us else i * 1e6 / self.rate

    @property
    def pass_us(self) -> float:
        """The length of one pass: its span plus one mean gap."""
        n = len(self.codes)
        if not self.offsets_us:
            return n * 1e6 / self.rate
        span = self.offsets_us[-1]
        return span + (span / (n - 1) if n > 1 and span > 0 else 1e6)


class TraceArrivals:
    """One worker's share of a trace: ``instant(k)`` of its k-th send (None after the end),
    ``slot(k)`` the trace index that names its key."""

    def __init__(self, trace: Trace, start_ns: int, end_ns: int, worker: int, workers: int) -> None:
        self.trace, self.start_ns, self.end_ns = trace, start_ns, end_ns
        self.worker, self.workers, self.n = worker, workers, len(trace.codes)
        self._pass_us = trace.pass_us

    def _index(self, k: int) -> tuple[int, int]:
        g = self.worker + k * self.workers
        return divmod(g, self.n)

    def instant(self, k: int) -> int | None:
        loop, i = self._index(k)
        at = self.start_ns + round((loop * self._pass_us + self.trace.offset_us(i)) * 1000
                                   / self.trace.speed)
        return at if at < self.end_ns else None

    def slot(self, k: int) -> int:
        return self._index(k)[1]


def _read(path: Path) -> pa.Table:
    """The trace file, Parquet or CSV. Their readers are imported here, by the coordinator only:
    imported with this module they put 13 MB in every worker process (which never reads one)."""
    import pyarrow.csv as pcsv  # noqa: PLC0415 - see the docstring
    import pyarrow.parquet as pq  # noqa: PLC0415

    try:
        with open(path, "rb") as handle:
            magic = handle.read(4)
        return pq.read_table(path) if magic == b"PAR1" else pcsv.read_csv(path)
    except (OSError, pa.ArrowException) as exc:
        raise InvalidTrace(f"cannot read {path}: {str(exc).splitlines()[0]}") from None


def _offsets_us(table: pa.Table, path: Path) -> list[int] | None:
    """Microseconds from the earliest request, or None when the trace has no time column."""
    name = next((c for c in TIME_COLUMNS if c in table.column_names), None)
    if name is None:
        return None
    column = table[name]
    if pa.types.is_timestamp(column.type):
        micros = pc.cast(pc.cast(column, pa.timestamp("us")), pa.int64())
    elif pa.types.is_integer(column.type) or pa.types.is_floating(column.type):
        micros = pc.cast(pc.round(pc.multiply(pc.cast(column, pa.float64()), 1e6)), pa.int64())
    else:
        raise InvalidTrace(f"{path}: column {name!r} is {column.type}, not seconds or a timestamp")
    if micros.null_count:
        raise InvalidTrace(f"{path}: column {name!r} has empty values")
    values = micros.to_pylist()
    first = min(values)
    return [v - first for v in values]


def read_trace(path: Path) -> tuple[list[str], list[str], list[int] | None]:
    """(keys hottest first, each request's key, offsets in µs or None) from a CSV or Parquet."""
    table = _read(path)
    if "key" not in table.column_names:
        raise InvalidTrace(f"{path} has no column 'key' (its columns: "
                           f"{', '.join(table.column_names) or 'none'})")
    if not 0 < table.num_rows <= MAX_TRACE:
        raise InvalidTrace(f"{path} holds {table.num_rows:,} requests (1 to {MAX_TRACE:,})")
    keys = [str(k) for k in pc.cast(table["key"], pa.string()).to_pylist()
            if k is not None]
    if len(keys) != table.num_rows or not all(0 < len(k) <= 200 for k in keys):
        raise InvalidTrace(f"{path}: every request needs a key of 1 to 200 characters")
    offsets = _offsets_us(table, path)
    if offsets is not None:
        order = sorted(range(len(keys)), key=offsets.__getitem__)
        keys, offsets = [keys[i] for i in order], [offsets[i] for i in order]
    return hottest_first(keys), keys, offsets


def hottest_first(keys: Sequence[str]) -> list[str]:
    """The distinct keys by their number of requests, most first (ties: first seen first)."""
    return [k for k, _ in Counter(keys).most_common()]
