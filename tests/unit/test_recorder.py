"""The recorder's packed rows come back, field by field, as the wire batch's columns."""

from __future__ import annotations

import struct

import pyarrow as pa
import pytest

from results.store.schema import WIRE_SCHEMA
from strategies import Outcome, Probe
from worker.recorder import PROBE_INT64, Recorder, wire_batch


def probe_with(seed: int) -> Probe:
    """A probe whose every field holds a distinct value derived from ``seed``."""
    probe = Probe()
    probe.origin_calls, probe.local_hit, probe.fallback = 1, 1, 1
    for i, name in enumerate(PROBE_INT64):
        setattr(probe, name, seed * 1_000_000_000_000 + i)
    return probe


def test_every_field_lands_in_its_own_column() -> None:
    rec = Recorder(7, ["a", "b", "c"], ["orders", "write"])
    rec.add(2, 111, 222, Outcome.FILLED, probe_with(3), None, 100, 1, 4, True, 999)
    rec.add(0, 333, 444, Outcome.ERROR, Probe(), "TimeoutError: late")
    rec.add(1, 555, 666, Outcome.ERROR, Probe(), "TimeoutError: late", stage=-1)
    batch = rec.to_batch()
    assert batch.schema == WIRE_SCHEMA
    rows = batch.to_pylist()
    first = rows[0]
    assert (first["client"], first["key"], first["op"], first["t_intended_ns"]) == (7, "c", "write", 100)
    assert (first["t_start_ns"], first["latency_ns"], first["stage"], first["bypass"]) == (111, 222, 4, True)
    assert (first["outcome"], first["origin_called"], first["local_hit"], first["fallback"]) == \
        ("filled", 1, 1, True)
    assert [first[name] for name in PROBE_INT64] == [3_000_000_000_000 + i for i in range(len(PROBE_INT64))]
    assert (first["commit_ns"], first["error"]) == (999, None)
    assert rows[1]["t_intended_ns"] == 333  # -1: as started
    assert [r["error"] for r in rows[1:]] == ["TimeoutError: late"] * 2
    assert rows[2]["stage"] == -1 and rows[1]["version_served"] == -1
    assert (len(rec), rec.errors, rec.origin_calls) == (3, 2, 1)


def test_rows_reads_a_slice_and_clips_at_the_end() -> None:
    rec = Recorder(0, ["k"])
    for i in range(5):
        rec.add(0, i, 10 * i, Outcome.HIT, Probe(), None)
    assert list(rec.rows(1, 3)["latency_ns"]) == [10, 20]
    assert list(rec.rows(3, 99)["t_start_ns"]) == [3, 4]
    assert len(rec.rows(5)) == 0


def test_a_value_out_of_its_column_range_is_refused() -> None:
    probe = Probe()
    probe.origin_calls = 300  # the int8 column cannot hold it: never wrapped silently
    rec = Recorder(0, ["k"])
    with pytest.raises(struct.error, match="format requires"):
        rec.add(0, 1, 1, Outcome.FILLED, probe, None)
    assert (len(rec), rec.origin_calls) == (0, 0)  # nothing of the refused row was kept


def test_one_wire_batch_of_several_clients_keeps_each_clients_rows_and_errors() -> None:
    """The shipper builds one batch of all its clients' drains: each recorder numbers its own
    error texts, so codes are mapped onto one table and every row keeps its own text."""
    keys, ops = ["a", "b"], ["orders"]
    first, second, third = (Recorder(c, keys, ops) for c in (4, 5, 6))
    first.add(0, 1, 10, Outcome.ERROR, Probe(), "TimeoutError: late")
    first.add(1, 2, 20, Outcome.ERROR, Probe(), "ConnectionError: gone")
    second.add(1, 3, 30, Outcome.HIT, Probe(), None)  # no error texts of its own
    third.add(0, 4, 40, Outcome.ERROR, Probe(), "ConnectionError: gone")  # its code 0
    third.add(0, 5, 50, Outcome.ERROR, Probe(), "MaxConnectionsError: too many")
    parts = [(rec, rec.drain()) for rec in (first, second, third)]
    rows = wire_batch(parts).to_pylist()
    assert [(r["client"], r["key"], r["t_start_ns"], r["error"]) for r in rows] == [
        (4, "a", 1, "TimeoutError: late"), (4, "b", 2, "ConnectionError: gone"),
        (5, "b", 3, None), (6, "a", 4, "ConnectionError: gone"),
        (6, "a", 5, "MaxConnectionsError: too many")]
    assert rows == pa.Table.from_batches([rec.to_batch(d) for rec, d in parts]).to_pylist()
