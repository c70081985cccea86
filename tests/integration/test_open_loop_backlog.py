"""The open loop against an origin it overloads: latency counts the queue, late sends drop.

A worker's open loop (``worker.loop.open_loop``) with its context built as ``worker.build`` does,
two client threads, every request bypassing the cache to a 20 ms origin: 100 requests/s of
capacity against 200 requests/s intended. The backlog grows by 100 sends a second, so a send
made later waits longer before it starts; its latency must show that wait (no coordinated
omission), its service time must not, and a send more than ``drop_ms`` behind must become a
``DroppedSend`` error row instead of a request.
"""

from __future__ import annotations

import statistics
import threading
import time
from typing import Any

import pyarrow as pa

from model.workload import KeySet, Query, Workload, single
from results.store.schema import DROPPED
from strategies import Outcome, Probe
from tests.strategy_helpers import SleepLoader
from worker.loop import LoopContext, Tables, open_loop
from worker.recorder import Recorder
from worker.schedule import Arrivals, Segment, Stages

RATE = 200.0  # intended sends per second
SECONDS = 1.5  # of intended sends: 300 in all
THREADS = 2
SERVICE_S = 0.02  # the origin's time per request: THREADS / SERVICE_S = 100 requests/s
# A served send is intended at half its start time, so it is start / 2 behind; past 1.8 s it
# would be more than 900 ms behind and is dropped. The drops begin in the last quarter of the
# run (which ends at 1.5 s + 0.9 s), so the early sends show the backlog growing.
DROP_MS = 900.0
SEND_SLACK_NS = 10_000_000  # between the loop's drop check and the request's own start stamp


def no_cache(key: str, probe: Probe) -> Outcome:
    raise AssertionError("bypass 1.0: no request may go through the cache")


def run_open_loop() -> tuple[list[dict[str, Any]], int]:
    """Run the overloaded open loop to its last send; return its rows and the send count."""
    workload = Workload(single(Query.ORDERS, KeySet(), 60_000), rates=(RATE,), bypass=(1.0,),
                        drop_ms=DROP_MS)
    tables = Tables.build(workload, seed=1)
    start = time.time_ns() + 100_000_000
    arrivals = Arrivals([Segment(start, RATE, int(RATE * SECONDS))], worker=0, workers=1)
    ctx = LoopContext(tables, [no_cache], [SleepLoader(SERVICE_S)], Stages(start, 0, 1),
                      bypass=[1.0, 1.0], end_ns=start + int(SECONDS * 1e9), arrivals=arrivals,
                      drop_ns=round(workload.drop_ms * 1e6), start_ns=start)
    recorders = [Recorder(i, tables.keys) for i in range(THREADS)]
    gate, stop = threading.Event(), threading.Event()
    clients = [threading.Thread(target=open_loop, args=(ctx, rec, gate, stop))
               for rec in recorders]
    for client in clients:
        client.start()
    gate.set()
    for client in clients:
        client.join(SECONDS + DROP_MS / 1000 + 10)
    stop.set()
    assert not any(c.is_alive() for c in clients), "the open loop did not finish its sends"
    table = pa.Table.from_batches([rec.to_batch() for rec in recorders])
    return table.to_pylist(), arrivals.total


def test_overloaded_open_loop_counts_the_queue_and_drops_late_sends() -> None:
    rows, sends = run_open_loop()
    assert len(rows) == sends  # every intended send is a row: a request or a dropped send
    served = sorted((r for r in rows if r["error"] is None), key=lambda r: r["t_intended_ns"])
    dropped = [r for r in rows if r["error"] is not None]
    drop_ns = DROP_MS * 1e6

    # Sends more than drop_ms behind are error rows of type DroppedSend, and only those.
    assert dropped, "the backlog passed drop_ms, yet no send was dropped"
    assert all(r["error"].startswith(DROPPED) for r in dropped), {r["error"] for r in dropped}
    for r in dropped:
        assert r["outcome"] == "error" and r["origin_called"] == 0
        assert r["t_start_ns"] - r["t_intended_ns"] > drop_ns
        assert r["latency_ns"] == r["t_start_ns"] - r["t_intended_ns"]
    assert all(r["t_start_ns"] - r["t_intended_ns"] <= drop_ns + SEND_SLACK_NS for r in served)

    # Every served request's latency counts from its intended instant: the wait in the
    # backlog plus its own service time.
    assert all(r["outcome"] == "filled" and r["bypass"] and r["origin_called"] == 1
               for r in served)
    short = [(r["latency_ns"], r["t_start_ns"] - r["t_intended_ns"], r["origin_ns"])
             for r in served if r["latency_ns"] < r["t_start_ns"] - r["t_intended_ns"] + r["origin_ns"]]
    assert not short, f"latency below queue wait + service (latency, wait, service): {short[:3]}"

    # The latency grows with the backlog; the service time does not.
    quarter = len(served) // 4
    assert quarter >= 20, len(served)
    first, last = served[:quarter], served[-quarter:]
    first_ms = statistics.median(r["latency_ns"] for r in first) / 1e6
    last_ms = statistics.median(r["latency_ns"] for r in last) / 1e6
    assert last_ms > 3 * first_ms, (first_ms, last_ms)
    first_service = statistics.median(r["origin_ns"] for r in first)
    last_service = statistics.median(r["origin_ns"] for r in last)
    assert first_service >= SERVICE_S * 1e9
    assert last_service < 2 * first_service, (first_service / 1e6, last_service / 1e6)
