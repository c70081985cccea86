"""Rows from worker to Parquet on a real broker (issue 25): each batch written once, a missing
one named, the worker's memory bounded with every dropped row counted."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import redis

from coordinator.trials.gather import RowGatherer
from coordinator.trials.plan import TrialPlan
from coordinator.trials.rows import align
from results.store import transport
from results.store.rundir import TrialParts
from strategies import Outcome, Probe, parse
from worker import shipper as shipping
from worker.recorder import Recorder
from worker.shipper import Shipper

KEY = "stampede:rows:test:1"


@pytest.fixture
def broker(redis_server: Callable[[str], str]) -> redis.Redis:
    client = redis.Redis.from_url(redis_server("broker"))
    client.delete(KEY)
    return client


def recorded(rows: int, client: int = 0) -> Recorder:
    rec = Recorder(client, ["orders:0"])
    probe = Probe()
    for i in range(rows):
        probe.origin_calls = int(i % 10 == 0)
        rec.add(0, 1_000 + i, 100, Outcome.FILLED if probe.origin_calls else Outcome.HIT, probe,
                None)
    return rec


PLAN = TrialPlan(trial=1, strategy=parse("naive"), repeat=1, periods=1, keys=("orders:0",),
                 shares=(), start_ns=0, window_start_ns=0, window_end_ns=10**12, end_ns=10**12,
                 first_expiry_ns=0, ttl_ms=1000)


def as_rows(worker: str, wire: pa.Table) -> pa.Table:
    """The coordinator's alignment, a clock offset of 0."""
    return align(PLAN, "test", worker, 0, wire)


def gatherer(broker: redis.Redis, tmp_path: Path) -> RowGatherer:
    return RowGatherer(broker, KEY, {0: "w1"}, as_rows, TrialParts(tmp_path / "trial=1"))


def add_batch(broker: redis.Redis, seq: int, rec: Recorder) -> int:
    batch = rec.to_batch(rec.drain())
    broker.xadd(KEY, {"w": 0, "seq": seq, "n": batch.num_rows, "data": transport.encode(batch)})
    return batch.num_rows


def test_a_batch_delivered_twice_is_written_once(broker: redis.Redis, tmp_path: Path) -> None:
    first, second = recorded(50), recorded(30, client=1)
    n0 = add_batch(broker, 0, first)
    data = broker.xrange(KEY)[-1][1]
    broker.xadd(KEY, data)  # the same batch again: a send retried after its reply was lost
    n1 = add_batch(broker, 1, second)
    broker.xadd(KEY, {"w": 0, "end": orjson.dumps({"batches": 2})})
    gather = gatherer(broker, tmp_path)
    assert gather.poll() == 4
    gather.close(keep_stream=False)
    written = pq.read_table(tmp_path / "trial=1" / "part-0.parquet")
    assert written.num_rows == n0 + n1 == 80
    assert gather.sent["w1"].duplicates == 1 and gather.complete("w1")
    assert gather.counts()["requests"] == 80 and gather.counts()["origin_calls"] == 8
    assert not broker.exists(KEY)  # trimmed as taken, then gone


def test_a_batch_that_never_came_is_named(broker: redis.Redis, tmp_path: Path) -> None:
    add_batch(broker, 0, recorded(10))
    add_batch(broker, 2, recorded(10))
    broker.xadd(KEY, {"w": 0, "end": orjson.dumps({"batches": 3})})
    gather = gatherer(broker, tmp_path)
    gather.poll()
    assert gather.sent["w1"].missing() == [1] and not gather.complete("w1")
    assert broker.xlen(KEY) == 0  # what was taken is trimmed: the broker holds only the unread


def test_the_stream_is_polled_as_it_grows(broker: redis.Redis, tmp_path: Path) -> None:
    gather = gatherer(broker, tmp_path)
    for seq in range(3):
        add_batch(broker, seq, recorded(5))
        assert gather.poll() == 1
    assert sorted(gather.sent["w1"].seqs) == [0, 1, 2] and gather.counts()["requests"] == 15


def test_a_poll_writes_for_its_budget_then_returns(broker: redis.Redis, tmp_path: Path) -> None:
    """A coordinator behind its workers must still get back to the liveness checks and the
    progress line: one poll writes for its budget, the next poll goes on where it stopped."""
    for seq in range(6):
        add_batch(broker, seq, recorded(5))
    gather = gatherer(broker, tmp_path)
    assert gather.poll(budget_s=0.0) == 1  # over budget after the first entry
    assert broker.xlen(KEY) == 5  # what was taken is trimmed, the rest waits
    assert gather.poll(budget_s=None) == 5
    assert sorted(gather.sent["w1"].seqs) == list(range(6))


def test_the_shipper_sends_numbered_batches_and_an_end_marker(broker: redis.Redis) -> None:
    rec = recorded(100)
    ship = Shipper(broker, KEY, worker_index=3, interval_s=60)
    ship.watch([rec])
    ship.ship()
    rec.add(0, 5, 5, Outcome.HIT, Probe(), None)
    done = ship.finish()
    entries = [fields for _, fields in broker.xrange(KEY)]
    assert [int(f[b"seq"]) for f in entries if b"data" in f] == [0, 1]
    end = orjson.loads(entries[-1][b"end"])
    assert end["batches"] == done.batches == 2 and end["rows"] == 101 and end["origin_calls"] == 10
    assert done.end_sent and done.dropped_rows == 0 and len(rec) == 101


def test_a_full_buffer_is_shipped_by_its_client_when_the_shipper_thread_is_behind(
        broker: redis.Redis, monkeypatch: pytest.MonkeyPatch) -> None:
    """The shipper thread never runs (as one starved of the GIL): a client whose buffer reaches
    FULL_ROWS ships the worker's rows itself; the buffer never holds more, nothing is lost."""
    monkeypatch.setattr(shipping, "FULL_ROWS", 10)
    ship = Shipper(broker, KEY, worker_index=0, interval_s=60)  # never started
    rec = recorded(0)
    ship.watch([rec])
    held = []
    for i in range(35):
        rec.add(0, i, 1, Outcome.HIT, Probe(), None)
        held.append(rec.held())
    assert max(held) < 10 and ship.shipped.client_ships == 3
    done = ship.finish()
    batches = [int(f[b"n"]) for _, f in broker.xrange(KEY) if b"data" in f]
    assert batches == [10, 10, 10, 5] and done.rows == 35 and done.client_ships == 3


def test_a_client_with_a_full_buffer_waits_for_the_coordinator_not_drops(
        broker: redis.Redis, monkeypatch: pytest.MonkeyPatch) -> None:
    """The stream is over its backlog: the client that fills up waits (its next request with
    it) until the coordinator takes entries, and the batch then leaves: nothing dropped."""
    monkeypatch.setattr(shipping, "FULL_ROWS", 10)
    ship = Shipper(broker, KEY, worker_index=0, interval_s=60, max_backlog=0)
    broker.xadd(KEY, {"w": 9, "end": b"{}"})  # one entry the coordinator has not taken
    threading.Timer(0.3, broker.delete, args=(KEY,)).start()  # it takes it 0.3 s later
    rec = recorded(0)
    ship.watch([rec])
    started = time.monotonic()
    for i in range(10):
        rec.add(0, i, 1, Outcome.HIT, Probe(), None)
    waited = time.monotonic() - started
    assert 0.25 < waited < shipping.FULL_WAIT_S, waited
    assert ship.shipped.client_ships == 1 and ship.shipped.client_wait_s >= 0.25
    assert [int(f[b"n"]) for _, f in broker.xrange(KEY) if b"data" in f] == [10]
    assert not ship._unsent and ship.finish().dropped_rows == 0


def test_busy_clients_keep_their_buffers_bounded_and_every_row_arrives(
        broker: redis.Redis, monkeypatch: pytest.MonkeyPatch) -> None:
    """Eight threads recording as fast as they can beside a running shipper: no buffer ever
    holds FULL_ROWS, whoever ships, and the stream gets every row once."""
    monkeypatch.setattr(shipping, "FULL_ROWS", 200)
    ship = Shipper(broker, KEY, worker_index=0, interval_s=0.01)
    recs = [recorded(0, client=c) for c in range(8)]
    ship.watch(recs)
    most = [0] * len(recs)

    def client(c: int) -> None:
        for i in range(5_000):
            recs[c].add(0, i, 1, Outcome.HIT, Probe(), None)
            most[c] = max(most[c], recs[c].held())

    threads = [threading.Thread(target=client, args=(c,)) for c in range(len(recs))]
    ship.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    done = ship.finish()
    assert max(most) < 200, most
    assert done.rows == 40_000 and done.dropped_rows == 0
    assert sum(int(f[b"n"]) for _, f in broker.xrange(KEY) if b"data" in f) == 40_000


def test_a_coordinator_behind_makes_the_worker_drop_and_count_not_grow(
        broker: redis.Redis, monkeypatch: pytest.MonkeyPatch) -> None:
    """The stream is full (more waiting than the backlog allows): at most ``max_unsent``
    batches wait in the worker, older ones are dropped, and every dropped row is counted."""
    monkeypatch.setattr(shipping, "FINISH_S", 0.2)
    ship = Shipper(broker, KEY, worker_index=0, interval_s=60, max_unsent=2, max_backlog=0)
    broker.xadd(KEY, {"w": 9, "end": b"{}"})  # one entry already waiting: over the backlog of 0
    rec = recorded(0)
    ship.watch([rec])
    for _ in range(5):
        for i in range(10):
            rec.add(0, i, 1, Outcome.HIT, Probe(), None)
        ship.ship()
        assert len(ship._unsent) <= 2
    done = ship.finish()
    assert done.batches == 5 and done.rows == 50
    assert done.dropped_rows == 50  # 3 dropped while waiting, 2 never left before the deadline
    assert broker.xlen(KEY) == 2  # the waiting entry and the end marker: no batch got through


def test_a_broker_that_refuses_keeps_the_batch_for_the_next_send(
        broker: redis.Redis, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shipping, "FINISH_S", 0.2)
    dead = redis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.2)
    ship = Shipper(dead, KEY, worker_index=0, interval_s=60)
    rec = recorded(10)
    ship.watch([rec])
    ship.ship()  # no exception: the batch waits, numbered
    assert len(ship._unsent) == 1 and ship.shipped.batches == 1
    ship._client = broker  # the broker is back
    done = ship.finish()
    assert done.dropped_rows == 0 and done.end_sent
    assert [int(f[b"seq"]) for _, f in broker.xrange(KEY) if b"data" in f] == [0]


def test_rows_that_come_after_the_trial_are_written_to_a_part_of_their_own(
        broker: redis.Redis, tmp_path: Path) -> None:
    """A worker given up on whose batches come later (it was stopped, then continued): the
    coordinator takes them at its next look (``take_late``) into ``part-1.parquet``."""
    add_batch(broker, 0, recorded(20))
    gather = gatherer(broker, tmp_path)
    gather.poll()
    gather.close(keep_stream=True)  # incomplete: no end marker yet
    assert not gather.complete("w1")
    add_batch(broker, 1, recorded(30))
    broker.xadd(KEY, {"w": 0, "end": orjson.dumps({"batches": 2})})
    assert gather.take_late() == 30 and gather.complete("w1")
    parts = sorted(p.name for p in (tmp_path / "trial=1").iterdir())
    assert parts == ["part-0.parquet", "part-1.parquet"]
    assert pq.read_table(tmp_path / "trial=1" / "part-1.parquet").num_rows == 30
