"""Row buffers: one per client thread, one packed record per request, no object kept alive.

A request's measurements go into the buffer as one ``struct`` record appended in one call: 22
``array.append`` calls cost 2.5 us a row here, a packed record 0.5 us, and on the client
threads' request path every microsecond is load the generator cannot send. Appending a
``bytes`` to a ``bytearray`` is one step under the GIL, so a reader on another thread (the
metrics scrape) sees whole rows only, never a row half written.
"""

from __future__ import annotations

import importlib.abc
import struct
import sys
from collections.abc import Callable, Sequence

import numpy as np
import pyarrow as pa

from results.store.schema import CACHE_STATUSES, OUTCOMES, WIRE_SCHEMA
from strategies import Outcome, Probe

# Probe fields stored as they are, in record order (int64 each).
PROBE_INT64 = ("origin_start_ns", "origin_ns", "pool_wait_ns", "lock_wait_ns", "stale_age_ns",
               "refresh_of_ns", "version_served", "version_set", "set_ns")
# The record: name and struct code, little-endian, packed (numpy's dtype below is the same layout).
FIELDS = (("key_code", "i"), ("t_intended_ns", "q"), ("op_code", "b"), ("stage", "h"),
          ("bypass", "b"), ("t_start_ns", "q"), ("latency_ns", "q"), ("outcome", "b"),
          ("origin_called", "b"), ("local_hit", "b"), ("fallback", "b"),
          *((name, "q") for name in PROBE_INT64), ("commit_ns", "q"), ("error_code", "i"),
          ("http_status", "h"), ("http_bytes", "q"), ("cache_status", "b"), ("age_s", "i"))


class _NoPandas(importlib.abc.MetaPathFinder):
    """Refuses ``pandas`` while pyarrow looks for it (``arrow_without_pandas``)."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name.partition(".")[0] == "pandas":
            raise ImportError("pyarrow's pandas integration is not used by the worker")


def _first_arrays_without_pandas() -> tuple[pa.Array, pa.Array]:
    """pyarrow imports pandas with its first array when pandas is installed (the embedded
    stack's virtualenv has it, for the docs' examples): 47 MB of a worker's or app process's
    memory, which neither ever uses. It asks once a process, so its first look, here at import
    (every worker and app process imports this module before it builds an array), is answered
    "not installed"; anything that imports pandas itself later (a plug-in) still can. Every
    array built later names its type: pyarrow's type inference asks again, and imports. When this
    array was built unguarded (the HTTP layer's cache words), the soak's two-level worker grew
    from 295 to 337 MB."""
    finder = _NoPandas()
    sys.meta_path.insert(0, finder)
    try:
        return pa.array(CACHE_STATUSES, pa.string()), pa.array(OUTCOMES, pa.string())
    finally:
        sys.meta_path.remove(finder)


_CACHE_WORDS, _OUTCOME_WORDS = _first_arrays_without_pandas()
ROW = struct.Struct("<" + "".join(code for _, code in FIELDS))
_PACK = ROW.pack
_NUMPY = {"b": "<i1", "h": "<i2", "i": "<i4", "q": "<i8"}
ROW_DTYPE = np.dtype([(name, _NUMPY[code]) for name, code in FIELDS])
assert ROW_DTYPE.itemsize == ROW.size  # one layout, read by numpy as written by struct
_INT64 = ("t_start_ns", "latency_ns", *PROBE_INT64, "commit_ns")  # int64 wire columns


class Recorder:
    """Appends one request's measurements as a packed record; strings are interned as codes."""

    __slots__ = ("_drained", "_drained_calls", "_errors", "_full_bytes", "_on_full", "_rows", "client",
                 "errors", "keys", "ops")

    def __init__(self, client: int, keys: Sequence[str] | pa.Array,
                 ops: Sequence[str] = ("get",)) -> None:
        self.client = client
        self.keys = keys  # a shared Arrow array: one copy of a large key set per worker
        self.ops = ops
        self._rows = bytearray()
        self._drained = 0  # rows handed out by ``drain`` (no longer held here)
        self._drained_calls = 0  # their origin calls
        self._errors: dict[str, int] = {}
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
        a write row's commit instant. Nothing but the record is done per row: the origin calls
        are summed from the rows (``origin_calls``)."""
        error_code = -1 if error is None else self._errors.setdefault(error, len(self._errors))
        self._rows += _PACK(
            key_code, t_start_ns if t_intended_ns < 0 else t_intended_ns, op, stage, bypass,
            t_start_ns, latency_ns, outcome, probe.origin_calls, probe.local_hit, probe.fallback,
            probe.origin_start_ns, probe.origin_ns, probe.pool_wait_ns, probe.lock_wait_ns,
            probe.stale_age_ns, probe.refresh_of_ns, probe.version_served, probe.version_set,
            probe.set_ns, commit_ns, error_code, probe.http_status, probe.http_bytes,
            probe.cache_status, probe.age_s)
        if error is not None:
            self.errors += 1
        if len(self._rows) >= self._full_bytes and self._on_full is not None:
            self._on_full(self)

    @property
    def origin_calls(self) -> int:
        """Origin calls of every row recorded, drained ones included."""
        return self._drained_calls + int(self.rows()["origin_called"].sum())

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
        rows = np.frombuffer(data, ROW_DTYPE)
        self._drained_calls += int(rows["origin_called"].sum())
        return rows

    def error_names(self) -> dict[int, str]:
        """Error code -> text (a copy: the client thread may add one meanwhile)."""
        return {code: text for text, code in dict(self._errors).items()}

    def to_batch(self, data: np.ndarray | None = None) -> pa.RecordBatch:
        """The wire batch of ``data`` (drained rows; default: every row held), times still on
        the worker's clock."""
        return wire_batch([(self, self.rows() if data is None else data)])


def wire_batch(parts: Sequence[tuple[Recorder, np.ndarray]]) -> pa.RecordBatch:
    """One wire batch of the drained rows of several recorders (one worker's clients, sharing
    its key and op tables), times still on the worker's clock.

    One batch for all of them, not one each: building a batch costs about a millisecond
    whatever its size (22 columns, three decoded), and a drain every 0.5 s of 25 clients at
    6,000 rows a second held 120 rows each: 8 us a row, more than the request itself."""
    first = parts[0][0]
    keys, ops = first.keys, first.ops
    if any(rec.keys is not keys or rec.ops is not ops for rec, _ in parts):
        raise ValueError("one wire batch holds recorders of one key and op table")
    # As bytes: numpy concatenates records field by field, in Python (``_promote_fields``).
    data = (np.concatenate([d.view(np.uint8) for _, d in parts]).view(ROW_DTYPE)
            if len(parts) > 1 else parts[0][1])
    clients = np.repeat(np.array([rec.client for rec, _ in parts], np.int32),
                        [len(d) for _, d in parts])
    errors, codes = _errors(parts, data)

    def column(name: str, kind: pa.DataType) -> pa.Array:
        return pa.array(np.ascontiguousarray(data[name]), kind)

    key_names = keys if isinstance(keys, pa.Array) else pa.array(keys, pa.string())
    columns = {
        "client": pa.array(clients, pa.int32()),
        "key": _decoded(column("key_code", pa.int32()), key_names),
        "op": _decoded(column("op_code", pa.int8()), pa.array(ops, pa.string())),
        "t_intended_ns": column("t_intended_ns", pa.int64()),
        "stage": column("stage", pa.int16()),
        "bypass": column("bypass", pa.int8()).cast(pa.bool_()),
        "outcome": _decoded(column("outcome", pa.int8()), _OUTCOME_WORDS),
        "origin_called": column("origin_called", pa.int8()),
        "error": pa.DictionaryArray.from_arrays(
            pa.array(codes, pa.int32(), mask=codes < 0), errors).cast(pa.string()),
        "local_hit": column("local_hit", pa.int8()),
        "fallback": column("fallback", pa.int8()).cast(pa.bool_()),
        "http_status": column("http_status", pa.int16()),
        "http_bytes": column("http_bytes", pa.int64()),
        # ``take``, not a dictionary cast: 12 ns a row against 64 (4,096-row batches)
        "cache_status": _CACHE_WORDS.take(column("cache_status", pa.int8())),
        "age_s": column("age_s", pa.int32()),
        **{name: column(name, pa.int64()) for name in _INT64},
    }
    return pa.RecordBatch.from_pydict(columns, schema=WIRE_SCHEMA)


def _errors(parts: Sequence[tuple[Recorder, np.ndarray]], data: np.ndarray
            ) -> tuple[pa.Array, np.ndarray]:
    """The error texts of every part in one table, and each row's code into it (-1: none):
    each recorder numbers its own texts, so a part's codes are mapped onto the shared table."""
    names: dict[str, int] = {}
    mapped = []
    for rec, d in parts:
        own = rec.error_names()  # a copy taken after the drain: holds every code in ``d``
        if not own:
            mapped.append(d["error_code"])
            continue
        remap = np.array([names.setdefault(own[c], len(names)) for c in range(len(own))],
                         np.int32)
        raw = d["error_code"]
        mapped.append(np.where(raw < 0, -1, remap[np.maximum(raw, 0)]))
    codes = np.concatenate(mapped) if len(mapped) > 1 else np.asarray(mapped[0])
    if len(codes) != len(data):
        raise AssertionError("error codes out of step with the rows")
    return pa.array(list(names) or [""], pa.string()), codes.astype(np.int32, copy=False)


def _decoded(codes: pa.Array, names: pa.Array) -> pa.Array:
    """The strings ``codes`` index in ``names``."""
    return pa.DictionaryArray.from_arrays(codes, names).cast(pa.string())
