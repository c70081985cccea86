"""A value compressed on fill is decompressed by every answer that serves it (experiment 004's
read-side cost of large values, now in the latency): on a real Redis, the hit's extra cost of
decompressing grows with the value's size; a worker's build turns it on with --compress."""

from __future__ import annotations

import statistics
import time
import zlib
from collections.abc import Iterator

import pytest
import redis

import strategies
from model.origin import ValueShaper
from model.services import make_pool
from model.workload import KeySet, Query, Workload, single
from strategies import Deps, Outcome, Probe, version
from strategies.commands import PlainCommands
from tests.helpers import trial_spec
from tests.strategy_helpers import SleepLoader
from worker.build import build


@pytest.fixture
def decoding() -> Iterator[None]:
    yield
    version.decode_with(None)


def hit_ms(cache: redis.Redis, size: int, decode: bool) -> float:
    """Median time of a cache hit on one compressed value of ``size`` bytes (40 hits)."""
    version.decode_with(zlib.decompress if decode else None)
    value = version.stamp(1, ValueShaper(size, compress=True)(b"{}"))
    naive = strategies.parse("naive").build(
        Deps(PlainCommands(cache), PlainCommands(cache), SleepLoader(), 60_000))
    naive.prime("big", value, int(time.time() * 1000) + 60_000)
    times = []
    for _ in range(40):
        t0 = time.perf_counter()
        assert naive.fetch("big", Probe()) is Outcome.HIT
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


def test_the_decompression_cost_of_a_hit_grows_with_the_value(cache: redis.Redis,
                                                            decoding: None) -> None:
    extra = {size: hit_ms(cache, size, True) - hit_ms(cache, size, False)
             for size in (10_000, 2_000_000)}
    assert extra[2_000_000] > 0.5, extra  # ms: decompressing 2 MB on every hit
    assert extra[2_000_000] > 10 * max(extra[10_000], 0.01), extra


def test_a_value_that_does_not_decompress_is_an_error(cache: redis.Redis, decoding: None) -> None:
    version.decode_with(zlib.decompress)
    naive = strategies.parse("naive").build(
        Deps(PlainCommands(cache), PlainCommands(cache), SleepLoader(), 60_000))
    naive.prime("plain", version.stamp(1, b"not zlib"), int(time.time() * 1000) + 60_000)
    with pytest.raises(zlib.error):
        naive.fetch("plain", Probe())


def test_the_worker_decodes_with_compress_only(postgres_dsn: str, cache: redis.Redis,
                                               decoding: None) -> None:
    pool = make_pool(postgres_dsn, 1)
    try:
        for compress, expected in ((True, zlib.decompress), (False, None)):
            workload = Workload(single(Query.ORDERS, KeySet(), 200), value_bytes=1000,
                                compress=compress)
            spec = trial_spec(2, 1.0, workload=workload.to_json())
            build(spec, PlainCommands(cache), PlainCommands(cache), pool)
            assert version.READING.decode is expected
    finally:
        pool.close()
