"""Columnar row buffers: one per client thread, no per-request object kept alive."""

from __future__ import annotations

from array import array
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from results.schema import OUTCOMES, WIRE_SCHEMA
from strategies import Outcome, Probe

_INT64 = ("t_start_ns", "latency_ns", "origin_start_ns", "origin_ns", "pool_wait_ns",
          "lock_wait_ns", "stale_age_ns", "refresh_of_ns", "version_served", "version_set",
          "set_ns", "commit_ns")


class Recorder:
    """Appends one request's measurements to typed arrays; strings are interned as codes."""

    __slots__ = ("_errors", "bypass", "client", "errors", "fallback", "key_codes", "keys", "local_hit",
                 "op_codes", "ops", "origin_calls", "outcome", "origin_called", "error_code",
                 "stage", "t_intended_ns", *_INT64)

    def __init__(self, client: int, keys: Sequence[str] | pa.Array,
                 ops: Sequence[str] = ("get",)) -> None:
        self.client = client
        self.keys = keys  # a shared Arrow array: one copy of a large key set per worker
        self.ops = ops
        self.t_intended_ns = array("q")
        self.op_codes = array("b")
        self.stage = array("h")
        self.bypass = array("b")
        self.t_start_ns = array("q")
        self.latency_ns = array("q")
        self.origin_start_ns = array("q")
        self.origin_ns = array("q")
        self.pool_wait_ns = array("q")
        self.lock_wait_ns = array("q")
        self.stale_age_ns = array("q")
        self.refresh_of_ns = array("q")
        self.version_served = array("q")
        self.version_set = array("q")
        self.set_ns = array("q")
        self.commit_ns = array("q")
        self.key_codes = array("i")
        self.outcome = array("b")
        self.origin_called = array("b")
        self.local_hit = array("b")
        self.fallback = array("b")
        self.error_code = array("i")
        self._errors: dict[str, int] = {}
        self.origin_calls = 0
        self.errors = 0

    def __len__(self) -> int:
        return len(self.outcome)

    def add(self, key_code: int, t_start_ns: int, latency_ns: int, outcome: Outcome,
            probe: Probe, error: str | None, t_intended_ns: int = -1, op: int = 0,
            stage: int = 0, bypass: bool = False, commit_ns: int = 0) -> None:
        """One request; ``t_intended_ns`` -1 means "as started" (closed loop); ``commit_ns``:
        a write row's commit instant."""
        self.key_codes.append(key_code)
        self.t_intended_ns.append(t_start_ns if t_intended_ns < 0 else t_intended_ns)
        self.op_codes.append(op)
        self.stage.append(stage)
        self.bypass.append(bypass)
        self.t_start_ns.append(t_start_ns)
        self.latency_ns.append(latency_ns)
        self.outcome.append(outcome)
        self.origin_called.append(probe.origin_calls)
        self.local_hit.append(probe.local_hit)
        self.fallback.append(probe.fallback)
        self.origin_start_ns.append(probe.origin_start_ns)
        self.origin_ns.append(probe.origin_ns)
        self.pool_wait_ns.append(probe.pool_wait_ns)
        self.lock_wait_ns.append(probe.lock_wait_ns)
        self.stale_age_ns.append(probe.stale_age_ns)
        self.refresh_of_ns.append(probe.refresh_of_ns)
        self.version_served.append(probe.version_served)
        self.version_set.append(probe.version_set)
        self.set_ns.append(probe.set_ns)
        self.commit_ns.append(commit_ns)
        self.origin_calls += probe.origin_calls
        if error is None:
            self.error_code.append(-1)
        else:
            self.errors += 1
            self.error_code.append(self._errors.setdefault(error, len(self._errors)))

    def to_batch(self) -> pa.RecordBatch:
        """The wire batch of this client's rows (times still on the worker's clock)."""
        n = len(self)
        error_table = pa.array(list(self._errors) or [""], pa.string())
        codes = pa.array(self.error_code, pa.int32())
        errors = pa.DictionaryArray.from_arrays(
            pc.if_else(pc.less(codes, 0), None, codes), error_table
        ).cast(pa.string())
        outcomes = pa.DictionaryArray.from_arrays(pa.array(self.outcome, pa.int8()),
                                                  pa.array(OUTCOMES)).cast(pa.string())
        key_names = self.keys if isinstance(self.keys, pa.Array) else pa.array(self.keys, pa.string())
        keys = pa.DictionaryArray.from_arrays(pa.array(self.key_codes, pa.int32()),
                                              key_names).cast(pa.string())
        ops = pa.DictionaryArray.from_arrays(pa.array(self.op_codes, pa.int8()),
                                             pa.array(self.ops, pa.string())).cast(pa.string())
        columns = {
            "client": pa.array([self.client] * n, pa.int32()),
            "key": keys,
            "op": ops,
            "t_intended_ns": pa.array(self.t_intended_ns, pa.int64()),
            "stage": pa.array(self.stage, pa.int16()),
            "bypass": pa.array(self.bypass, pa.int8()).cast(pa.bool_()),
            "outcome": outcomes,
            "origin_called": pa.array(self.origin_called, pa.int8()),
            "error": errors,
            "local_hit": pa.array(self.local_hit, pa.int8()),
            "fallback": pa.array(self.fallback, pa.int8()).cast(pa.bool_()),
            **{name: pa.array(getattr(self, name), pa.int64()) for name in _INT64},
        }
        return pa.RecordBatch.from_pydict(columns, schema=WIRE_SCHEMA)
