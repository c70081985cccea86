"""Rows leave the worker while the trial runs, in numbered batches on the broker.

Every ``interval_s`` the shipper thread drains each client's recorder (``Recorder.drain``),
folds the rows into the live metrics, and adds them as one batch (zstd Arrow IPC) to the
trial's Redis stream (``transport.rows_key``), numbered ``seq`` 0, 1, 2 ... per worker. After the
last client is done it ships what is left and an end marker with its totals, so the coordinator
knows which batches to expect. Delivery is at least once: a batch whose XADD failed (the broker
restarting) is sent again with its number, and the coordinator writes a number once.

The worker holds at most ``FULL_ROWS`` rows per client plus ``max_unsent`` unsent batches. The
shipper thread drains long before a buffer is full, unless the client threads starve it of the
GIL (two-level's local hits, 80,000 a second a process, never release it: the thread then ran
seconds late and the buffers grew by 12 MB a second). So a client whose buffer reaches
``FULL_ROWS`` ships its own rows, on its own thread, between two requests, and while the stream
holds more than ``max_backlog`` batches the coordinator has not taken (it trims what it took)
that client waits, up to ``FULL_WAIT_S``: the load slows to what the coordinator writes; each
time is counted (``client_ships``, ``client_wait_s``). The shipper thread does not wait. When
``max_unsent`` batches are waiting, the oldest is dropped and its rows and origin calls are
counted (``dropped_rows``, ``dropped_calls``): nothing is lost unseen.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import redis

from results.store import transport
from worker.recorder import Recorder, wire_batch

Fold = Callable[[np.ndarray, dict[int, str]], None]  # the live metrics' view of each drain
FINISH_S = 10.0  # after the clients: how long the last batches may take to leave
FULL_ROWS = 4096  # rows a client's buffer holds before the client ships them itself (480 KiB)
FULL_WAIT_S = 5.0  # how long that client waits for the coordinator to take batches, then drops


@dataclass
class Shipped:
    """What this worker sent of one trial: the end marker's content, and the task's result."""

    batches: int = 0
    rows: int = 0
    origin_calls: int = 0
    dropped_rows: int = 0
    dropped_calls: int = 0
    client_ships: int = 0  # ships a client thread made itself, its buffer full (the thread behind)
    client_wait_s: float = 0.0  # how long those clients waited to ship (the coordinator behind)
    first_start_ns: int = 0  # the earliest request (this host's clock); 0: none yet
    end_sent: bool = False  # the end marker reached the stream (else: the task's result says it)


@dataclass
class _Batch:
    seq: int
    data: bytes
    rows: int
    calls: int


class Shipper:
    """``start``, ``watch`` each recorder, then ``finish`` once the clients are done."""

    def __init__(self, client: redis.Redis, key: str, worker_index: int, interval_s: float = 1.0,
                 max_unsent: int = 16, max_backlog: int = 512, fold: Fold | None = None) -> None:
        self._client, self._key, self._worker = client, key, worker_index
        self._interval_s, self._max_unsent, self._max_backlog = interval_s, max_unsent, max_backlog
        self._fold = fold
        self._recorders: list[Recorder] = []
        self._unsent: collections.deque[_Batch] = collections.deque()
        self.shipped = Shipped()
        self._stop = threading.Event()
        self._mutex = threading.Lock()  # one ship at a time: the thread's, or finish's
        self._thread = threading.Thread(target=self._run, name="shipper", daemon=True)

    def watch(self, recorders: Sequence[Recorder]) -> None:
        with self._mutex:
            self._recorders.extend(recorders)
        for rec in recorders:
            rec.bound(FULL_ROWS, self._ship_full)

    def _ship_full(self, rec: Recorder) -> None:
        """A client's buffer is full: the client ships its own rows, waiting up to FULL_WAIT_S
        while the coordinator is behind (as does every client that fills up meanwhile): the
        load slows to what the coordinator writes rather than dropping rows, whose origin calls
        the herds would then miss. Its own rows only: the batch stays small, so no thread's
        allocator arena grows by a whole worker's rows."""
        with self._mutex:
            if rec.held() < FULL_ROWS:
                return  # the shipper thread took them while this client waited
            started = time.monotonic()
            self._pack([rec])
            self._send(deadline=started + FULL_WAIT_S)
            self.shipped.client_ships += 1
            self.shipped.client_wait_s += time.monotonic() - started

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            self.ship()

    def ship(self) -> None:
        """Drain every recorder into one batch, then send what the backlog allows."""
        with self._mutex:
            self._pack()
            self._send(deadline=time.monotonic())

    def _pack(self, recorders: Sequence[Recorder] | None = None) -> None:
        """Drain ``recorders`` (default: all) into one numbered batch: one wire batch per key
        table (all of a trial's recorders share one), not one per client (wire_batch)."""
        groups: dict[tuple[int, int], list[tuple[Recorder, np.ndarray]]] = {}
        for rec in self._recorders if recorders is None else recorders:
            data = rec.drain()
            if not data.size:
                continue
            if self._fold is not None:
                self._fold(data, rec.error_names())
            groups.setdefault((id(rec.keys), id(rec.ops)), []).append((rec, data))
        if not groups:
            return
        table = pa.Table.from_batches([wire_batch(parts) for parts in groups.values()])
        first = pc.min(table["t_start_ns"]).as_py()
        calls = int(pc.sum(table["origin_called"]).as_py() or 0)
        s = self.shipped
        s.first_start_ns = min(s.first_start_ns, first) if s.first_start_ns else first
        self._unsent.append(_Batch(s.batches, transport.encode(table), table.num_rows, calls))
        s.batches += 1
        s.rows += table.num_rows
        s.origin_calls += calls
        while len(self._unsent) > self._max_unsent:
            dropped = self._unsent.popleft()
            s.dropped_rows += dropped.rows
            s.dropped_calls += dropped.calls

    def _send(self, deadline: float) -> None:
        """Send the waiting batches, oldest first, while the backlog allows (until ``deadline``)."""
        while self._unsent:
            try:
                if self._client.xlen(self._key) > self._max_backlog:
                    if time.monotonic() >= deadline:
                        return
                    time.sleep(0.05)
                    continue
                batch = self._unsent[0]
                self._client.xadd(self._key, {"w": self._worker, "seq": batch.seq,
                                              "n": batch.rows, "data": batch.data})
            except (redis.ConnectionError, redis.TimeoutError):
                return  # kept, numbered: sent again next time
            self._unsent.popleft()

    def finish(self) -> Shipped:
        """After the clients: ship the rest, send the end marker; the totals either way."""
        self._stop.set()
        if self._thread.ident is not None:  # started
            self._thread.join()
        with self._mutex:
            self._pack()
            deadline = time.monotonic() + FINISH_S
            while self._unsent and time.monotonic() < deadline:
                self._send(deadline)
                if self._unsent:
                    time.sleep(0.1)
            for lost in self._unsent:  # could not leave in time: counted, not silently gone
                self.shipped.dropped_rows += lost.rows
                self.shipped.dropped_calls += lost.calls
            self._unsent.clear()
            self.shipped.end_sent = True
            end = orjson.dumps(asdict(self.shipped))
            try:
                self._client.xadd(self._key, {"w": self._worker, "end": end})
            except redis.RedisError:
                self.shipped.end_sent = False  # the task's result carries the same totals
        return self.shipped
