"""What one request costs in a client thread, stage by stage (benchmark 1's breakdown).

Each stage is timed alone, on one thread, with the CPU clock of that thread (user + system),
in the bench process against the stack's own servers: the round trip (a lean GET on the cache),
the loop itself (the closed loop's checks around a request), the strategy (naive's hit, with a
cache that answers at once), timing and probe (the request wrapper around a fetch that returns
at once), recording (one packed row), shipping (a worker's drain of 25 clients into one Arrow
batch, zstd, XADD to the broker: per row), the coordinator's share (decode, align, Parquet: per
row) and the self-check's sampler thread (per second, divided by a worker's request rate). What
a worker's processes spend beyond their sum in a trial is the price of 25 threads sharing one
GIL and two cores: hand-offs, waits, the scheduler.
"""

from __future__ import annotations

import statistics
import tempfile
import threading
import time
from array import array
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import redis

import strategies
from coordinator.trials.plan import TrialPlan
from coordinator.trials.rows import align
from model.services import RedisPath, redis_commands
from results.store import transport
from results.store.rundir import TrialParts
from strategies import Deps, Outcome, Probe
from worker.loop import LoopContext, Tables, requester
from worker.recorder import Recorder, wire_batch
from worker.schedule import MASK, Stages
from worker.selfcheck import GeneratorMonitor

CLIENTS = 25  # a worker's share of 200 client threads over 8 workers
VALUE = b"\0" * 8 + b"x" * 90  # a stamped value (strategies.version) as the all-hit trial serves
KEY = "stampede:bench:stages"


def thread_ns(run: Callable[[int], object], n: int, repeats: int) -> float:
    """CPU ns of this thread per unit of ``run(n)``: the median of ``repeats``."""
    times = []
    for _ in range(repeats):
        t0 = time.thread_time_ns()
        run(n)
        times.append((time.thread_time_ns() - t0) / n)
    return statistics.median(times)


class AtOnce:
    """A cache that answers every GET at once with the stamped value."""

    def get(self, key: str) -> bytes:
        return VALUE


class Unused:
    def load(self, key: str, probe: Probe) -> bytes:
        raise AssertionError("an all-hit request never calls the origin")


def all_hit_context(fetch: Callable[[str, Probe], Outcome], key: str = KEY, end_ns: int = 2**62,
                    start_ns: int = 0) -> LoopContext:
    """One endpoint, one key, one stage, no bypass: the all-hit trial's tables (benchmark 13's
    loops too)."""
    size = MASK + 1
    tables = Tables([key], array("b", bytes(size)), [array("i", bytes(4 * size))],
                    array("d", [0.5] * size))
    return LoopContext(tables, [fetch], [Unused()], Stages(0, 0, 1), [0.0, 0.0], end_ns,
                       start_ns=start_ns)


def _null_add(*_: object) -> None:
    return None


class _NullRecorder:
    client = 0
    add = staticmethod(_null_add)


def loop_ns(n: int, repeats: int) -> float:
    """The closed loop's own work around a request (stop check, clock, end check, counter)."""
    stop = threading.Event()

    def run(count: int) -> None:
        stopped, now, end_ns, k, send = stop.is_set, time.time_ns, 2**62, 0, _null_add
        while not stopped() and k < count:
            t = now()
            if t >= end_ns:
                return
            send(k & MASK, t, t)
            k += 1
    return thread_ns(run, n, repeats)


def strategy_ns(n: int, repeats: int) -> float:
    naive = strategies.parse("naive").build(Deps(AtOnce(), AtOnce(), Unused(), 600_000))  # type: ignore[arg-type]
    fetch, probe = naive.fetch, Probe()

    def run(count: int) -> None:
        for _ in range(count):
            fetch(KEY, probe)
    return thread_ns(run, n, repeats)


def request_ns(n: int, repeats: int) -> float:
    """The request wrapper (``worker.loop.requester``) around a fetch that returns at once, its
    row handed to a recorder that keeps nothing."""
    probe = Probe()
    send = requester(all_hit_context(lambda key, p: Outcome.HIT), _NullRecorder(), probe)  # type: ignore[arg-type]

    def run(count: int) -> None:
        now = time.time_ns
        for k in range(count):
            t = now()
            send(k & MASK, t, t)
    return thread_ns(run, n, repeats)


def recording_ns(n: int, repeats: int) -> float:
    """One row recorded (``Recorder.add`` of a hit), the buffer drained at its bound as a
    worker's is."""
    rec, probe = Recorder(0, [KEY]), Probe()

    def drained(full: Recorder) -> None:
        full.drain()
    rec.bound(4096, drained)
    add, hit = rec.add, Outcome.HIT

    def run(count: int) -> None:
        for k in range(count):
            add(0, k, 100_000, hit, probe, None, k, 0, 0, False)
    return thread_ns(run, n, repeats)


def round_trip_ns(cache_url: str, n: int, repeats: int) -> float:
    """A lean GET of the stamped value on the trial's cache (model.lean)."""
    commands = redis_commands(RedisPath.LEAN, cache_url, 1)
    commands.set(KEY, VALUE)
    try:
        def run(count: int) -> None:
            get = commands.get
            for _ in range(count):
                get(KEY)
        return thread_ns(run, n, repeats)
    finally:
        commands.close()


def _drains(rows_each: int) -> list[Recorder]:
    keys, ops = pa.array([KEY]), ["get"]
    probe, recs = Probe(), []
    for client in range(CLIENTS):
        rec = Recorder(client, keys, ops)
        for i in range(rows_each):
            rec.add(0, 1_800_000_000_000_000_000 + i * 1000, 100_000, Outcome.HIT, probe, None)
        recs.append(rec)
    return recs


PLAN = TrialPlan(trial=1, strategy=strategies.parse("naive"), repeat=1, periods=1, keys=(KEY,),
                 shares=(), start_ns=0, window_start_ns=0, window_end_ns=2**62, end_ns=2**62,
                 first_expiry_ns=0, ttl_ms=1000)


def shipping_ns(broker_url: str, rows_each: int, repeats: int) -> tuple[float, float]:
    """Per row: a worker's drain of CLIENTS recorders into one batch, encoded and added to a
    stream on the broker; then the coordinator's decode, align and Parquet write of those
    batches (its file closed once, at the end, as a trial's is)."""
    client = redis.Redis.from_url(broker_url)
    stream = f"{KEY}:rows"
    ship_ns = gather_ns = rows = 0
    try:
        with tempfile.TemporaryDirectory(prefix="bench-stages-") as tmp:
            parts = TrialParts(Path(tmp) / "trial=1")
            for _ in range(repeats * 4):
                recs = _drains(rows_each)
                t0 = time.thread_time_ns()
                table = pa.Table.from_batches([wire_batch([(r, r.drain()) for r in recs])])
                data = transport.encode(table)
                client.xadd(stream, {"w": 0, "seq": 0, "n": table.num_rows, "data": data})
                t1 = time.thread_time_ns()
                parts.write(align(PLAN, "bench", "w1", 0, transport.decode(data)))
                gather_ns += time.thread_time_ns() - t1
                ship_ns += t1 - t0
                rows += table.num_rows
            t2 = time.thread_time_ns()
            parts.close()
            gather_ns += time.thread_time_ns() - t2
    finally:
        client.delete(stream)
        client.close()
    return ship_ns / rows, gather_ns / rows


def sampler_ns_per_s() -> float:
    """CPU ns per second of the self-check's loop-lag sampler (worker.selfcheck): the sampler
    thread's own CPU clock over a second. The process's clock would also count every other
    thread of the bench process (the embedded stack's readers and waiters): it read 26 ms a
    second where the thread itself spent about 4."""
    monitor = GeneratorMonitor().start()
    assert monitor.ident is not None
    clock = time.pthread_getcpuclockid(monitor.ident)
    c0, w0 = time.clock_gettime_ns(clock), time.monotonic()
    time.sleep(1.0)
    spent, wall = time.clock_gettime_ns(clock) - c0, time.monotonic() - w0
    monitor.stop()
    return spent / wall


def measure(cache_url: str, broker_url: str, n: int = 100_000, repeats: int = 5,
            rows_each: int = 120) -> dict[str, Any]:
    """Every stage's ns per request (the sampler's per second)."""
    ship, gather = shipping_ns(broker_url, rows_each, repeats)
    return {
        "round trip (lean GET)": round_trip_ns(cache_url, max(n // 10, 100), repeats),
        "the loop itself": loop_ns(n, repeats),
        "strategy (naive's hit)": strategy_ns(n, repeats),
        "timing and probe": request_ns(n, repeats),
        "recording": recording_ns(n, repeats),
        "shipping (one batch a drain, zstd, XADD)": ship,
        "coordinator (decode, align, Parquet)": gather,
        "sampler_per_s": sampler_ns_per_s(),
    }
