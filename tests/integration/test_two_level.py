"""Two-level cache: a rewrite in one process drops the local copy in another, within a bound."""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable

import redis

from results.store import transport
from strategies import Deps, Probe
from strategies.params import Expiry, OnWrite
from strategies.twolevel import TwoLevel, TwoLevelParams
from strategies.version import stamp
from tests.strategy_helpers import MakeCommands, SleepLoader, two_level_reader, two_level_rows

KEY = "orders:0"
BOUND_S = 1.0  # pub/sub delivery on loopback is ~ms; generous for a shared 2-core machine


def test_write_in_one_process_invalidates_the_local_copy_in_another(
        redis_server: Callable[[str], str], cache: redis.Redis, commands: MakeCommands) -> None:
    url = redis_server("cache")
    cache.set(KEY, stamp(1, b"old"), px=60_000)
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    child = ctx.Process(target=two_level_reader, args=(url, KEY, out, commands.path))
    child.start()
    own = commands(cache)
    writer = TwoLevel(Deps(own, own, SleepLoader(), 60_000), TwoLevelParams())
    try:
        assert out.get(timeout=60) == ("ready", 1)  # the child serves from its local copy
        written_at = time.time()
        writer.write(KEY, stamp(2, b"new"), Expiry(60_000, None), Probe())
        tag, dropped_at, local_hit, value = out.get(timeout=30)
    finally:
        writer.close()
        child.join(15)
        if child.is_alive():
            child.kill()
    assert tag == "dropped"
    assert dropped_at is not None, "the local copy was never invalidated"
    assert dropped_at - written_at < BOUND_S
    assert local_hit == 0  # the next read went to Redis ...
    assert value == stamp(2, b"new")  # ... and cached the rewritten value locally
    assert child.exitcode == 0


class Version7:
    """The origin after a write: version 7 of the value."""

    def load(self, key: str, probe: Probe) -> bytes:
        probe.origin_calls += 1
        return stamp(7, b"new")


def test_another_process_stops_serving_the_old_version_within_the_publish_delay(
        redis_server: Callable[[str], str], cache: redis.Redis, commands: MakeCommands) -> None:
    """From the rows: after a write-through in this process, the other process's reads serve
    version 7 from at most one publish delay on (its local copy of version 1 had a 60 s TTL)."""
    url = redis_server("cache")
    cache.set(KEY, stamp(1, b"old"), px=60_000)
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    child = ctx.Process(target=two_level_rows, args=(url, KEY, out, 1.5, commands.path))
    child.start()
    own = commands(cache)
    writer = TwoLevel(Deps(own, own, Version7(), 60_000), TwoLevelParams(on_write=OnWrite.UPDATE))
    try:
        assert out.get(timeout=60) == "ready"
        time.sleep(0.3)
        written_ns = time.time_ns()
        writer.on_write(KEY, Probe())
        rows = transport.decode(out.get(timeout=30))
    finally:
        writer.close()
        child.join(15)
        if child.is_alive():
            child.kill()
    served = rows["version_served"].to_pylist()
    starts = rows["t_start_ns"].to_pylist()
    before = [v for v, t in zip(served, starts, strict=True) if t < written_ns]
    old_after = [t for v, t in zip(served, starts, strict=True) if t >= written_ns and v < 7]
    assert before and set(before) == {1}  # it served its local copy of version 1 until the write
    assert served[-1] == 7
    assert not old_after or max(old_after) - written_ns < BOUND_S * 1e9, \
        f"version 1 served {(max(old_after) - written_ns) / 1e6:.0f} ms after the write"
    assert all(rows["local_hit"].to_pylist()[-10:])  # and serves version 7 from its local copy
