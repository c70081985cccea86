"""Benchmarks 3 and 4: the cost of recording a row, and of shipping a million rows to Parquet."""

from __future__ import annotations

import tempfile
import time
import tracemalloc
from pathlib import Path

import pyarrow.parquet as pq

from results.store import transport
from strategies import Outcome, Probe
from worker.recorder import Recorder

ROWS = 1_000_000


def size(n_bytes: float) -> str:
    """``13.1 MiB``, or ``25.3 KiB`` below a MiB (a test's thousand rows are not 0.0 MiB)."""
    return f"{n_bytes / 2**20:.1f} MiB" if n_bytes >= 2**20 else f"{n_bytes / 2**10:.1f} KiB"


def record_rows(n: int) -> Recorder:
    recorder = Recorder(0, ["orders:0"])
    probe = Probe()
    add = recorder.add
    for i in range(n):
        add(0, i, 100_000, Outcome.HIT, probe, None)
    return recorder


def run(rows: int = ROWS) -> None:
    """Benchmarks 3 and 4 on ``rows`` rows (a million in ``make bench``); memory per million."""
    t0 = time.perf_counter_ns()
    record_rows(rows)
    per_row = (time.perf_counter_ns() - t0) / rows
    tracemalloc.start()
    recorder = record_rows(rows)
    held = tracemalloc.get_traced_memory()[0] * 1_000_000 / rows
    tracemalloc.stop()
    print(f"[3] recording a row: {per_row:.0f} ns; a worker holds {held / 2**20:.1f} MiB "
          f"per million rows recorded between two shipments (every 0.5 s)")

    w0 = time.perf_counter()
    batch = recorder.to_batch()
    wire = transport.encode(batch)
    t1 = time.perf_counter()
    table = transport.decode(wire)
    with tempfile.TemporaryDirectory() as tmp:
        pq.write_table(table, Path(tmp) / "part-0.parquet", compression="zstd")
        on_disk = (Path(tmp) / "part-0.parquet").stat().st_size
    t2 = time.perf_counter()
    print(f"[4] {rows:,} rows: encode {1000 * (t1 - w0):.1f} ms, {size(len(wire))} "
          f"on the trial's stream (bytes, no base64); decode + Parquet {1000 * (t2 - t1):.1f} ms, "
          f"{size(on_disk)} on disk")
