"""One batch of request rows as numpy arrays: what the scans fold (results.figures.scan).

Strings (strategy, op, outcome, error) are read from Parquet dictionary-encoded, so a batch holds
small integer codes and a short list of values, never a million Python strings: a mask such as
"op is a write" is one ``np.isin`` on the codes. Each column is converted once per batch.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from results.figures import scan
from results.store.schema import DROPPED, LATE_MS, LEGACY_WRITE_OP, NOT_REQUESTS, WRITE_OP

_LATE_NS = round(LATE_MS * 1e6)


class Batch:
    """Columns of one record batch, converted on first use."""

    def __init__(self, batch: pa.RecordBatch | pa.Table) -> None:
        self.table = batch if isinstance(batch, pa.Table) else pa.Table.from_batches([batch])
        self.n = self.table.num_rows
        self._ints: dict[str, np.ndarray] = {}
        self._buckets: dict[str, np.ndarray] = {}
        self._codes: dict[str, tuple[np.ndarray, list[str | None]]] = {}

    def has(self, name: str) -> bool:
        return name in self.table.column_names

    def ints(self, name: str) -> np.ndarray:
        """An integer or boolean column as int64 (nulls as 0)."""
        if name not in self._ints:
            column = pc.fill_null(self.table[name], 0 if not pa.types.is_boolean(
                self.table[name].type) else False)
            self._ints[name] = np.asarray(column.to_numpy(), np.int64)
        return self._ints[name]

    def buckets(self, name: str) -> np.ndarray:
        """A column's quantile buckets (results.figures.scan.buckets), made once per batch."""
        if name not in self._buckets:
            self._buckets[name] = scan.buckets(self.ints(name))
        return self._buckets[name]

    def flag(self, name: str) -> np.ndarray:
        return np.asarray(self.ints(name) != 0, bool)

    def codes(self, name: str) -> tuple[np.ndarray, list[str | None]]:
        """A string column as (codes, values): ``values[codes[i]]`` is row i's (None: null)."""
        if name not in self._codes:
            column = self.table[name].combine_chunks()
            if not pa.types.is_dictionary(column.type):
                column = pc.dictionary_encode(column)
            indices = np.asarray(pc.fill_null(column.indices, -1).to_numpy(), np.int64)
            values: list[str | None] = column.dictionary.to_pylist()
            self._codes[name] = (indices, [*values, None])  # code -1 reads values[-1]: None
        return self._codes[name]

    def value_counts(self, name: str, rows: np.ndarray) -> dict[str, int]:
        """How often each non-empty value of string column ``name`` stands in ``rows``."""
        codes, values = self.codes(name)
        found = np.bincount(codes[rows] + 1, minlength=len(values) + 1)  # null (code -1) at 0
        return {str(values[code]): n for code, n in enumerate(found[1:].tolist())
                if n and values[code]}

    def is_in(self, name: str, wanted: Iterable[str]) -> np.ndarray:
        codes, values = self.codes(name)
        hits = np.array([v in set(wanted) for v in values], bool)
        return np.asarray(hits[codes], bool)

    def starts_with(self, name: str, prefix: str) -> np.ndarray:
        codes, values = self.codes(name)
        hits = np.array([v is not None and v.startswith(prefix) for v in values], bool)
        return np.asarray(hits[codes], bool)

    # The row sets every figure is over (results.figures.metrics defines them).
    def writes(self) -> np.ndarray:
        return self.is_in("op", (WRITE_OP, LEGACY_WRITE_OP))

    def reads(self) -> np.ndarray:
        return ~self.writes()

    def client_requests(self) -> np.ndarray:
        return np.asarray(self.reads() & ~self.is_in("op", NOT_REQUESTS), bool)

    def in_window(self) -> np.ndarray:
        return self.flag("in_window")

    def outcome(self, name: str) -> np.ndarray:
        return self.is_in("outcome", (name,))

    def dropped(self) -> np.ndarray:
        return self.starts_with("error", DROPPED) if self.has("error") else np.zeros(self.n, bool)

    def late(self) -> np.ndarray:
        """Open-loop sends started more than LATE_MS behind their intended instant (not dropped)."""
        behind = self.ints("t_start_ns") - self.ints("t_intended_ns")
        return np.asarray((behind > _LATE_NS) & ~self.dropped(), bool)
