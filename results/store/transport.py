"""Rows from worker to coordinator with no shared filesystem: Arrow IPC inside a JSON string.

Celery carries JSON only, so the compressed IPC stream travels base64-encoded.
"""

from __future__ import annotations

import base64

import pyarrow as pa

_OPTIONS = pa.ipc.IpcWriteOptions(compression="zstd")


def encode(batch: pa.RecordBatch) -> str:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema, options=_OPTIONS) as writer:
        writer.write_batch(batch)
    return base64.b64encode(sink.getvalue().to_pybytes()).decode("ascii")


def decode(text: str) -> pa.Table:
    data = base64.b64decode(text.encode("ascii"), validate=True)
    with pa.ipc.open_stream(pa.BufferReader(data)) as reader:
        return reader.read_all()
