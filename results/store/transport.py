"""Rows from worker to coordinator with no shared filesystem: zstd Arrow IPC.

Batches travel as bytes on the broker's Redis (a stream per trial, ``rows_key``), never through
Celery, whose messages are JSON only; ``encode_text`` is the same bytes base64-encoded, for a
JSON field.
"""

from __future__ import annotations

import base64

import pyarrow as pa

_OPTIONS = pa.ipc.IpcWriteOptions(compression="zstd")


def rows_key(run_id: str, trial: int) -> str:
    """The Redis stream that carries a trial's row batches from every worker."""
    return f"stampede:rows:{run_id}:{trial}"


def encode(table: pa.Table | pa.RecordBatch) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema, options=_OPTIONS) as writer:
        if isinstance(table, pa.RecordBatch):
            writer.write_batch(table)
        else:
            writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


def decode(data: bytes) -> pa.Table:
    with pa.ipc.open_stream(pa.BufferReader(data)) as reader:
        return reader.read_all()


def encode_text(table: pa.Table | pa.RecordBatch) -> str:
    return base64.b64encode(encode(table)).decode("ascii")


def decode_text(text: str) -> pa.Table:
    return decode(base64.b64decode(text.encode("ascii"), validate=True))
