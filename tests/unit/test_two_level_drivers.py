"""two-level under both drivers (sync: threads, asyncio: tasks) over the scripted store and the
same seeded interleavings (tests/scripted.py): the same rows, local hits, fills and waits, and
its two promises: an invalidation that arrives between requests is obeyed by every request that
starts after it (none serves the old value from its local copy), and a local copy is served no
longer than ``local_ttl_ms`` on the core's clock (the driver's, here the fake one).

The invalidation is a writer of another process: it rewrites the key in the cache and publishes
it; the scripted store's PUBLISH reaches the core's ``heard`` at once (its listener).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import pytest

import strategies
from strategies import Deps, Outcome, Probe
from strategies.core.twolevel import CHANNEL
from strategies.drivers.aio import AsyncDriver, afetch, for_asyncio
from strategies.version import stamp
from tests import scripted, scripted_io
from tests.scripted import FakeClock, Interleaving, Origin, Store
from tests.unit.test_two_drivers import KEY, TTL_MS, attempt, attempt_async

CLIENTS = 4
ROUNDS = 4
SEEDS = range(8)
NEW = stamp(9, b"new")  # the writer's version
THINK_S = 0.001  # between a client's requests (fake time)
WRITE_AFTER_S = 0.0025  # the writer waits this long: the requests are under way


@dataclass
class Run:
    rows: dict[tuple[str, int], tuple[Any, ...]]
    after: dict[tuple[str, int], bool]  # the request started after the writer's publish
    log: list[tuple[str, ...]]
    order: list[str]
    calls: list[str]


def _world(seed: int) -> tuple[FakeClock, list[tuple[str, ...]], Interleaving, Store, Store]:
    clock, log = FakeClock(), list[tuple[str, ...]]()
    cache, locks = Store(clock, log), Store(clock, log)
    cache.set(KEY, stamp(0, b"old"), px=TTL_MS)
    return clock, log, Interleaving(clock, seed), cache, locks


def run_sync(spec: str, seed: int, write: bool) -> Run:
    clock, log, plan, cache, locks = _world(seed)
    sched, origin = scripted_io.ThreadScheduler(plan), Origin()
    deps = Deps(scripted_io.SyncCommands(cache, sched, "cache"),  # type: ignore[arg-type]
                scripted_io.SyncCommands(locks, sched, "locks"),  # type: ignore[arg-type]
                scripted_io.SyncLoader(origin, sched), TTL_MS, clock=clock, sleep=sched.sleep,
                park=sched.park, listen=False)
    strategy = strategies.parse(spec).build(deps)
    scripted.subscribe(cache, strategy)
    rows: dict[tuple[str, int], tuple[Any, ...]] = {}
    after: dict[tuple[str, int], bool] = {}
    published = [False]
    for i in range(CLIENTS):
        def client(who: str = f"c{i}") -> None:
            for r in range(ROUNDS):
                after[who, r] = published[0]
                rows[who, r] = attempt(lambda probe: strategy.fetch(KEY, probe))
                sched.sleep(THINK_S)  # a local hit is no point of the schedule: time moves here
        sched.spawn(f"c{i}", client)
    if write:
        def writer() -> None:
            sched.sleep(WRITE_AFTER_S)
            other = scripted_io.SyncCommands(cache, sched, "writer")
            other.set(KEY, NEW, px=TTL_MS)
            other.pipeline(("PUBLISH", CHANNEL, KEY))
            published[0] = True
        sched.spawn("w", writer)
    sched.run()
    return Run(rows, after, log, plan.order, origin.calls)


def run_async(spec: str, seed: int, write: bool) -> Run:
    clock, log, plan, cache, locks = _world(seed)
    origin = Origin()
    rows: dict[tuple[str, int], tuple[Any, ...]] = {}
    after: dict[tuple[str, int], bool] = {}
    published = [False]

    async def main() -> None:
        sched = scripted_io.AsyncScheduler(plan)
        strategy = for_asyncio(spec, TTL_MS, clock=clock)
        scripted.subscribe(cache, strategy)
        driver = AsyncDriver(scripted_io.AsyncCommands(cache, sched, "cache"),
                             scripted_io.AsyncCommands(locks, sched, "locks"),
                             scripted_io.AsyncLoader(origin, sched), None, sched.sleep, sched.park)
        for i in range(CLIENTS):
            async def client(who: str = f"c{i}") -> None:
                for r in range(ROUNDS):
                    after[who, r] = published[0]
                    rows[who, r] = await attempt_async(
                        lambda probe: afetch(strategy, KEY, probe, driver))
                    await sched.sleep(THINK_S)
            sched.spawn(f"c{i}", client)
        if write:
            async def writer() -> None:
                await sched.sleep(WRITE_AFTER_S)
                other = scripted_io.AsyncCommands(cache, sched, "writer")
                await other.set(KEY, NEW, px=TTL_MS)
                await other.pipeline(("PUBLISH", CHANNEL, KEY))
                published[0] = True
            sched.spawn("w", writer)
        await sched.run()

    asyncio.run(main())
    return Run(rows, after, log, plan.order, origin.calls)


def both(spec: str, seed: int, write: bool) -> Run:
    threaded, asyncio_ = run_sync(spec, seed, write), run_async(spec, seed, write)
    assert threaded.order == asyncio_.order, seed
    assert threaded.log == asyncio_.log, seed
    assert threaded.rows == asyncio_.rows, seed
    assert threaded.after == asyncio_.after, seed
    assert threaded.calls == asyncio_.calls, seed
    return threaded


def _local(row: tuple[Any, ...]) -> bool:
    return bool(row[-1])  # test_two_drivers._row ends with probe.local_hit


def _gets(run: Run) -> int:
    return sum(1 for c in run.log if c[1] == "cache" and c[2] == "GET")


def test_local_copies_are_served_and_spare_the_cache() -> None:
    for seed in SEEDS:
        run = both("two-level:local_ttl_ms=60000", seed, write=False)
        assert not run.calls and all(row[0] == "HIT" for row in run.rows.values()), seed
        local = sum(_local(row) for row in run.rows.values())
        assert local >= CLIENTS * (ROUNDS - 1), (seed, run.rows)  # a GET each at most
        assert _gets(run) + local == CLIENTS * ROUNDS, seed


def test_a_local_copy_is_not_served_past_its_local_ttl() -> None:
    """0.05 ms: gone before a client's next request (it thinks 1 ms between them)."""
    for seed in SEEDS:
        run = both("two-level:local_ttl_ms=0.05", seed, write=False)
        assert not any(_local(row) for row in run.rows.values()), (seed, run.rows)
        assert _gets(run) == CLIENTS * ROUNDS, seed


@pytest.mark.parametrize("spec", ["two-level:local_ttl_ms=60000",
                                  "two-level:local_ttl_ms=60000,on_cache_error=origin"])
def test_an_invalidation_between_requests_drops_the_local_copy(spec: str) -> None:
    served_old_locally = served_new_after = 0
    for seed in SEEDS:
        run = both(spec, seed, write=True)
        for at, row in run.rows.items():
            if run.after[at]:  # started after the publish: never the old value
                assert row[2] == 9, (seed, at, row)
                served_new_after += 1
            elif _local(row) and row[2] == 0:
                served_old_locally += 1
    assert served_old_locally > 0  # there were local copies to drop ...
    assert served_new_after > 0  # ... and requests after the invalidation


def test_a_threaded_local_or_cache_hit_starts_no_generator(monkeypatch: pytest.MonkeyPatch) -> None:
    """The threaded fetch calls the core's plain functions inline (item 5: the hit path)."""
    from unittest import mock

    from strategies.core.twolevel import TwoLevelCore
    from strategies.drivers.sync import SyncDriver

    def no_generator(*_: object) -> None:
        raise AssertionError("a hit started a generator")

    monkeypatch.setattr(SyncDriver, "run", no_generator)
    monkeypatch.setattr(TwoLevelCore, "steps", no_generator)
    cache = mock.Mock()
    cache.get.return_value = stamp(3, b"value")
    clock = FakeClock()
    strategy = strategies.parse("two-level").build(
        Deps(cache, mock.MagicMock(), mock.Mock(), TTL_MS, clock=clock, listen=False))
    first, second = Probe(), Probe()
    assert strategy.fetch(KEY, first) is Outcome.HIT and strategy.fetch(KEY, second) is Outcome.HIT
    assert (first.local_hit, second.local_hit) == (0, 1) and second.version_served == 3
    assert cache.get.call_count == 1
