"""Two-level cache: a rewrite in one process drops the local copy in another, within a bound."""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable

import redis

from strategies import Deps
from strategies.twolevel import TwoLevel, TwoLevelParams
from tests.strategy_helpers import SleepLoader, two_level_reader

KEY = "orders:0"
BOUND_S = 1.0  # pub/sub delivery on loopback is ~ms; generous for a shared 2-core machine


def test_write_in_one_process_invalidates_the_local_copy_in_another(
        redis_server: Callable[[str], str], cache: redis.Redis) -> None:
    url = redis_server("cache")
    cache.set(KEY, b"old", px=60_000)
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    child = ctx.Process(target=two_level_reader, args=(url, KEY, out))
    child.start()
    writer = TwoLevel(Deps(cache, cache, SleepLoader(), 60_000), TwoLevelParams())
    try:
        assert out.get(timeout=60) == ("ready", 1)  # the child serves from its local copy
        written_at = time.time()
        writer.write(KEY, b"new", 60_000)
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
    assert value == b"new"  # ... and cached the rewritten value locally
    assert child.exitcode == 0
