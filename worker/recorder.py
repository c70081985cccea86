"""Row buffers: one per client thread, one packed record per request, no object kept alive.

A request's measurements go into the buffer as one ``struct`` record appended in one call: 22
``array.append`` calls cost 2.5 us a row here, a packed record 0.5 us, and on the client
threads' request path every microsecond is load the generator cannot send. Appending a
``bytes`` to a ``bytearray`` is one step under the GIL, so a reader on another thread (the
metrics scrape) sees whole rows only, never a row half written.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from results.store.schema import OUTCOMES, WIRE_SCHEMA
from strategies import Outcome, Probe

# Probe fields stored as they are, in record order (int64 each).
PROBE_INT64 = ("origin_start_ns", "origin_ns", "pool_wait_ns", "lock_wait_ns", "stale_age_ns",
               "refresh_of_ns", "version_served", "version_set", "set_ns")
# The record: name and struct code, little-endian, packed (numpy's dtype below is the same layout).
FIELDS = (("key_code", "i"), ("t_intended_ns", "q"), ("op_code", "b"), ("stage", "h"),
          ("bypass", "b"), ("t_start_ns", "q"), ("latency_ns", "q"), ("outcome", "b"),
          ("origin_called", "b"), ("local_hit", "b"), ("fallback", "b"),
          *((name, "q") for name in PROBE_INT64), ("commit_ns", "q"), ("error_code", "i"))
ROW = struct.Struct("<" + "".join(code for _, code in FIELDS))
_NUMPY = {"b": "<i1", "h": "<i2", "i": "<i4", "q": "<i8"}
ROW_DTYPE = np.dtype([(name, _NUMPY[code]) for name, code in FIELDS])
assert ROW_DTYPE.itemsize == ROW.size  # one layout, read by numpy as written by struct
_INT64 = ("t_start_ns", "latency_ns", *PROBE_INT64, "commit_ns")  # int64 wire columns


class Recorder:
    """Appends one request's measurements as a packed record; strings are interned as codes."""

    __slots__ = ("_drained", "_errors", "_full_bytes", "_on_full", "_rows", "client", "errors", "keys",
                 "ops", "origin_calls")

    def __init__(self, client: int, keys: Sequence[str] | pa.Array,
                 ops: Sequence[str] = ("get",)) -> None:
        self.client = client
        self.keys = keys  # a shared Arrow array: one copy of a large key set per worker
        self.ops = ops
        self._rows = bytearray()
        self._drained = 0  # rows handed out by ``drain`` (no longer held here)
        self._errors: dict[str, int] = {}
        self.origin_calls = 0
        self.errors = 0
        self._full_bytes = 1 << 62  # no limit until ``bound`` sets one
        self._on_full: Callable[[Recorder], None] | None = None

    def bound(self, rows: int, on_full: Callable[[Recorder], None]) -> None:
        """Once ``rows`` are held (not yet drained), ``add`` calls ``on_full(self)`` on the
        client's own thread: the buffer's bound when the draining thread falls behind."""
        self._full_bytes, self._on_full = rows * ROW.size, on_full

    def held(self) -> int:
        """Rows recorded and not yet drained."""
        return len(self._rows) // ROW.size

    def __len__(self) -> int:
        """Rows recorded so far, drained ones included."""
        return self._drained + len(self._rows) // ROW.size

    def add(self, key_code: int, t_start_ns: int, latency_ns: int, outcome: Outcome,
            probe: Probe, error: str | None, t_intended_ns: int = -1, op: int = 0,
            stage: int = 0, bypass: bool = False, commit_ns: int = 0) -> None:
        """One request; ``t_intended_ns`` -1 means "as started" (closed loop); ``commit_ns``:
        a write row's commit instant."""
        error_code = -1 if error is None else self._errors.setdefault(error, len(self._errors))
        row = ROW.pack(
            key_code, t_start_ns if t_intended_ns < 0 else t_intended_ns, op, stage, bypass,
            t_start_ns, latency_ns, outcome, probe.origin_calls, probe.local_hit, probe.fallback,
            probe.origin_start_ns, probe.origin_ns, probe.pool_wait_ns, probe.lock_wait_ns,
            probe.stale_age_ns, probe.refresh_of_ns, probe.version_served, probe.version_set,
            probe.set_ns, commit_ns, error_code)
        self._rows += row
        self.origin_calls += probe.origin_calls
        if error is not None:
            self.errors += 1
        if len(self._rows) >= self._full_bytes and self._on_full is not None:
            self._on_full(self)

    def rows(self, start: int = 0, end: int | None = None) -> np.ndarray:
        """A copy of the held rows ``start`` to ``end`` (default: all held) as a numpy record
        array with the fields of ``FIELDS``; safe while a client thread appends."""
        size = ROW.size
        held = len(self._rows) // size
        stop = held if end is None else min(end, held)
        return np.frombuffer(self._rows[start * size:max(start, stop) * size], ROW_DTYPE)

    def drain(self) -> np.ndarray:
        """The rows recorded since the last drain, no longer held here (the shipper's: one
        consumer). Safe while a client thread appends: a copy of whole rows is taken and only
        that prefix is deleted, each in one step under the GIL."""
        size = ROW.size
        end = len(self._rows) // size * size
        data = bytes(self._rows[:end])
        del self._rows[:end]
        self._drained += end // size
        return np.frombuffer(data, ROW_DTYPE)

    def error_names(self) -> dict[int, str]:
        """Error code -> text (a copy: the client thread may add one meanwhile)."""
        return {code: text for text, code in dict(self._errors).items()}

    def to_batch(self, data: np.ndarray | None = None) -> pa.RecordBatch:
        """The wire batch of ``data`` (drained rows; default: every row held), times still on
        the worker's clock."""
        data = self.rows() if data is None else data
        n = len(data)

        def column(name: str, kind: pa.DataType) -> pa.Array:
            return pa.array(np.ascontiguousarray(data[name]), kind)

        error_table = pa.array(list(self._errors) or [""], pa.string())
        codes = column("error_code", pa.int32())
        errors = pa.DictionaryArray.from_arrays(
            pc.if_else(pc.less(codes, 0), None, codes), error_table
        ).cast(pa.string())
        key_names = self.keys if isinstance(self.keys, pa.Array) else pa.array(self.keys, pa.string())
        columns = {
            "client": pa.array(np.full(n, self.client, np.int32)),
            "key": _decoded(column("key_code", pa.int32()), key_names),
            "op": _decoded(column("op_code", pa.int8()), pa.array(self.ops, pa.string())),
            "t_intended_ns": column("t_intended_ns", pa.int64()),
            "stage": column("stage", pa.int16()),
            "bypass": column("bypass", pa.int8()).cast(pa.bool_()),
            "outcome": _decoded(column("outcome", pa.int8()), pa.array(OUTCOMES)),
            "origin_called": column("origin_called", pa.int8()),
            "error": errors,
            "local_hit": column("local_hit", pa.int8()),
            "fallback": column("fallback", pa.int8()).cast(pa.bool_()),
            **{name: column(name, pa.int64()) for name in _INT64},
        }
        return pa.RecordBatch.from_pydict(columns, schema=WIRE_SCHEMA)


def _decoded(codes: pa.Array, names: pa.Array) -> pa.Array:
    """The strings ``codes`` index in ``names``."""
    return pa.DictionaryArray.from_arrays(codes, names).cast(pa.string())
