"""Each ported strategy, run by the sync driver (threads) and by the asyncio driver (tasks) over
the same scripted store and the same seeded interleaving (tests/scripted.py), gives the same
rows, the same origin calls, the same waits, the same commands in the same order and the same
final cache: its logic exists once (strategies.core). And each defence holds in every one of
those interleavings (lock-dc fills once an expiry, swr refreshes once, ...), so a broken core
goes red here, whichever driver runs it.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest

import strategies
from strategies import Deps, Outcome, Probe, envelope
from strategies.base import Job
from strategies.drivers.aio import AsyncDriver, AsyncJob, afetch, for_asyncio
from strategies.version import stamp
from tests import scripted, scripted_io
from tests.scripted import FakeClock, Interleaving, Origin, Store

KEY = "k"
TTL_MS = 2000
CLIENTS = 5
ROUNDS = 2
SEEDS = range(6)
Setup = Callable[[Store, Store, FakeClock], None]


def cold(cache: Store, locks: Store, clock: FakeClock) -> None:
    """The key has just expired: nothing is cached."""


def early(cache: Store, locks: Store, clock: FakeClock) -> None:
    """xfetch's value expires in 2 ms; its last recompute took 5 ms: an early refresh is due."""
    expiry_us = clock.wall_ns() // 1000 + 2000
    cache.set(KEY, envelope.pack(stamp(0, b"old"), expiry_us, 0.005), px=TTL_MS)


def soft_expired(cache: Store, locks: Store, clock: FakeClock) -> None:
    """swr's value is 1 ms past its soft TTL, well inside its hard TTL."""
    soft_us = clock.wall_ns() // 1000 - 1000
    cache.set(KEY, envelope.pack(stamp(0, b"old"), soft_us), px=TTL_MS)


def stale_copy(cache: Store, locks: Store, clock: FakeClock) -> None:
    """lease: the value expired, its stale copy is still there."""
    cache.set(f"stale:{KEY}", envelope.pack(stamp(0, b"old"), clock.wall_ns() // 1000 - 1000),
              px=1000)


def held_lock(cache: Store, locks: Store, clock: FakeClock) -> None:
    """Nothing cached, and the lock held by a filler that died: every waiter times out."""
    locks.set(f"lock:{KEY}", b"a dead filler", px=60_000)


def held_lease(cache: Store, locks: Store, clock: FakeClock) -> None:
    """lease: nothing cached, no stale copy, the lease held by a filler that died."""
    cache.set(f"lease:{KEY}", b"a dead filler", px=60_000)


def soft_expired_locks_down(cache: Store, locks: Store, clock: FakeClock) -> None:
    soft_expired(cache, locks, clock)
    locks.down = True


def locks_down(cache: Store, locks: Store, clock: FakeClock) -> None:
    """Nothing cached, and every lock-store command fails (on_lock_error decides)."""
    locks.down = True


def cache_down(cache: Store, locks: Store, clock: FakeClock) -> None:
    """Every cache command fails (on_cache_error decides)."""
    cache.down = True


def warm(cache: Store, locks: Store, clock: FakeClock) -> None:
    """The value is cached (two-level: its local copies come from reading it)."""
    cache.set(KEY, stamp(0, b"old"), px=TTL_MS)


def read_only(cache: Store, locks: Store, clock: FakeClock) -> None:
    """Nothing cached, and every cache write fails: a request has its value when it fails."""
    cache.read_only = True


def soft_expired_read_only(cache: Store, locks: Store, clock: FakeClock) -> None:
    soft_expired(cache, locks, clock)
    cache.read_only = True


@dataclass(frozen=True)
class Case:
    spec: str
    setup: Setup
    fills: int | None = None  # the origin calls every interleaving must give (None: any)
    error: str | None = None  # the one error type rows may have (None: no error rows)
    followers: str | None = None  # local-lock: its followers' error when their leader's failed


CASES = [
    Case("naive", cold),
    Case("lock", cold),
    Case("lock-dc", cold, fills=1),
    Case("lock-dc:wake=notify", cold, fills=1),
    Case("lock:wake=notify", cold),
    Case("xfetch", early),
    Case("xfetch-lock", early, fills=1),
    Case("xfetch-lock", cold, fills=1),
    Case("swr", soft_expired, fills=1),
    Case("swr", cold, fills=1),
    Case("lease", cold, fills=1),
    Case("lease:stale_ms=0", cold, fills=1),
    Case("lease", stale_copy, fills=1),
    # failures: thrown into the logic at its yield, by either driver
    Case("lock-dc:max_wait_ms=20", held_lock, fills=0, error="LockWaitTimeout"),
    Case("lock-dc:wake=notify,max_wait_ms=20", held_lock, fills=0, error="LockWaitTimeout"),
    Case("lease:stale_ms=0,max_wait_ms=20", held_lease, fills=0, error="LockWaitTimeout"),
    Case("lock-dc:on_lock_error=open", locks_down),
    Case("lock-dc:on_lock_error=closed", locks_down, fills=0, error="LockStoreDown"),
    Case("swr:on_lock_error=closed", soft_expired_locks_down, fills=0, error="LockStoreDown"),
    Case("swr:on_lock_error=open", soft_expired_locks_down),
    # local-lock: one in-process leader, the others park on its flight (one process here)
    Case("local-lock", cold, fills=1),
    Case("local-lock:wake=notify", cold, fills=1),
    Case("local-lock:distributed=false", cold, fills=1),
    Case("local-lock:max_wait_ms=20", held_lock, fills=0, error="LockWaitTimeout",
         followers="StrategyError"),
    Case("local-lock:on_lock_error=closed", locks_down, fills=0, error="LockStoreDown",
         followers="StrategyError"),
    Case("local-lock:on_lock_error=open", locks_down, fills=1),
    # on_cache_error: fail raises the cache's error; origin answers from the origin, once
    Case("naive", cache_down, fills=0, error="ConnectionError"),
    Case("naive:on_cache_error=origin", cache_down, fills=CLIENTS * ROUNDS),
    Case("lock-dc:on_cache_error=origin", cache_down, fills=CLIENTS * ROUNDS),
    Case("lease:on_cache_error=origin", cache_down, fills=CLIENTS * ROUNDS),
    Case("naive:on_cache_error=origin", read_only, fills=CLIENTS * ROUNDS),
    Case("naive", read_only, error="ReadOnlyError"),
    # the value never comes: lock-dc's waiters time out; local-lock's followers fail with
    # their leader (as the threaded wrapper had it), who is answered
    Case("lock-dc:on_cache_error=origin,max_wait_ms=20", read_only, error="LockWaitTimeout"),
    Case("local-lock:on_cache_error=origin", read_only, followers="StrategyError"),
    Case("swr:on_cache_error=origin", soft_expired_read_only),
    Case("swr", soft_expired_read_only, error="ReadOnlyError"),
    # two-level: lock-dc behind a local copy; its fill's PUBLISH reaches the process's core
    # (Store.subscribers); invalidations and the local TTL: tests/unit/test_two_level_drivers.py
    Case("two-level", cold, fills=1),
    Case("two-level", warm, fills=0),
    Case("two-level:local_ttl_ms=0.05", warm, fills=0),
    Case("two-level:max_wait_ms=20", held_lock, fills=0, error="LockWaitTimeout"),
    Case("two-level:on_cache_error=origin", cache_down, fills=CLIENTS * ROUNDS),
]


@dataclass
class World:
    """What one run leaves: the rows by (request, round), the origin calls, the command log,
    the interleaving and the stores."""

    rows: dict[tuple[str, int], tuple[Any, ...]]
    calls: list[str]
    log: list[tuple[str, ...]]
    order: list[str]
    cache: dict[str, Any]
    locks: dict[str, Any]


def _row(outcome: Outcome, probe: Probe, error: str | None) -> tuple[Any, ...]:
    return (outcome.name, error, probe.version_served, probe.version_set, probe.set_ns,
            probe.lock_wait_ns, probe.stale_age_ns, probe.refresh_of_ns, probe.origin_calls,
            probe.origin_ns, probe.fallback, probe.local_hit)


@pytest.fixture(autouse=True)
def fixed_draw(monkeypatch: pytest.MonkeyPatch) -> None:
    """XFetch's draw, fixed: -ln(0.5) x 5 ms = 3.5 ms ahead, past the 2 ms left (early)."""
    monkeypatch.setattr(strategies.xfetch, "draw", lambda: 0.5)


def attempt(answer: Callable[[Probe], Outcome]) -> tuple[Any, ...]:
    """One request's (or job's) row, a failure an error row of its type."""
    probe = Probe()
    try:
        return _row(answer(probe), probe, None)
    except Exception as exc:  # noqa: BLE001 - an error row
        return _row(Outcome.ERROR, probe, type(exc).__name__)


async def attempt_async(answer: Callable[[Probe], Awaitable[Outcome]]) -> tuple[Any, ...]:
    probe = Probe()
    try:
        return _row(await answer(probe), probe, None)
    except Exception as exc:  # noqa: BLE001 - an error row
        return _row(Outcome.ERROR, probe, type(exc).__name__)


def run_sync(case: Case, seed: int) -> World:
    clock, log = FakeClock(), list[tuple[str, ...]]()
    plan = Interleaving(clock, seed)
    sched = scripted_io.ThreadScheduler(plan)
    cache, locks, origin = Store(clock, log), Store(clock, log), Origin()
    case.setup(cache, locks, clock)
    rows: dict[tuple[str, int], tuple[Any, ...]] = {}
    jobs = itertools.count()  # background jobs' names, in the order submitted

    class Background:
        def submit(self, key: str, job: Job) -> None:
            who = f"bg{next(jobs)}-{sched.who()}"

            def body() -> None:
                rows[who, 0] = attempt(job)
            sched.spawn(who, body)

    deps = Deps(scripted_io.SyncCommands(cache, sched, "cache"),  # type: ignore[arg-type]
                scripted_io.SyncCommands(locks, sched, "locks"),  # type: ignore[arg-type]
                scripted_io.SyncLoader(origin, sched), TTL_MS, background=Background(), clock=clock,
                sleep=sched.sleep, park=sched.park, listen=False)
    strategy = strategies.parse(case.spec).build(deps)
    scripted.subscribe(cache, strategy)
    for i in range(CLIENTS):
        def client(who: str = f"c{i}") -> None:
            for r in range(ROUNDS):
                rows[who, r] = attempt(lambda probe: strategy.fetch(KEY, probe))
        sched.spawn(f"c{i}", client)
    sched.run()
    return World(rows, origin.calls, log, plan.order, cache.state(), locks.state())


def run_async(case: Case, seed: int) -> World:
    clock, log = FakeClock(), list[tuple[str, ...]]()
    plan = Interleaving(clock, seed)
    cache, locks, origin = Store(clock, log), Store(clock, log), Origin()
    case.setup(cache, locks, clock)
    rows: dict[tuple[str, int], tuple[Any, ...]] = {}
    jobs = itertools.count()  # background jobs' names, in the order submitted

    async def main() -> None:
        sched = scripted_io.AsyncScheduler(plan)

        class Background:
            def submit(self, key: str, job: AsyncJob) -> None:
                who = f"bg{next(jobs)}-{sched.who()}"

                async def body() -> None:
                    rows[who, 0] = await attempt_async(job)
                sched.spawn(who, body)

        strategy = for_asyncio(case.spec, TTL_MS, clock=clock)
        scripted.subscribe(cache, strategy)
        driver = AsyncDriver(scripted_io.AsyncCommands(cache, sched, "cache"),
                             scripted_io.AsyncCommands(locks, sched, "locks"),
                             scripted_io.AsyncLoader(origin, sched), Background(), sched.sleep,
                             sched.park)
        for i in range(CLIENTS):
            async def client(who: str = f"c{i}") -> None:
                for r in range(ROUNDS):
                    rows[who, r] = await attempt_async(
                        lambda probe: afetch(strategy, KEY, probe, driver))
            sched.spawn(f"c{i}", client)
        await sched.run()

    asyncio.run(main())
    return World(rows, origin.calls, log, plan.order, cache.state(), locks.state())


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.spec}@{c.setup.__name__}")
def test_both_drivers_give_the_same_trial_and_the_defence_holds(case: Case) -> None:
    waits = 0
    for seed in SEEDS:
        threaded, asyncio_ = run_sync(case, seed), run_async(case, seed)
        assert threaded.order == asyncio_.order, seed  # the same interleaving ...
        assert threaded.log == asyncio_.log, seed  # ... the same commands, in the same order
        assert threaded.rows == asyncio_.rows, seed  # outcomes, waits, versions, ages
        assert threaded.calls == asyncio_.calls, seed  # the origin calls (fills), by whom
        assert threaded.cache == asyncio_.cache, seed
        assert threaded.locks == asyncio_.locks, seed
        assert len(threaded.rows) >= CLIENTS * ROUNDS
        if case.fills is not None:
            assert len(threaded.calls) == case.fills, (seed, threaded.rows)
        errors = {row[1] for row in threaded.rows.values()} - {None}
        assert errors == {case.error, case.followers} - {None}, threaded.rows
        waits += sum(row[0] == "WAITED" for row in threaded.rows.values())
        if "distributed=false" in case.spec:  # the in-process flight alone: no lock store
            assert not [c for c in threaded.log if c[1] == "locks"], seed
    if case.spec.startswith(("lock", "local-lock", "two-level")) and case.setup is cold:
        assert waits > 0  # the scenario made requests wait: the waiting path was compared


def test_every_built_in_cache_strategy_has_a_two_driver_case() -> None:
    """Issue 34's "every strategy": a strategy registered later without a case fails here."""
    ours = {name for name, cls in strategies.registry._REGISTRY.items()
            if cls.__module__.startswith("strategies.")  # not the tests' own plug-ins
            and getattr(cls, "sans_io", None) is not None}  # nginx and varnish are HTTP fronts
    assert ours - {c.spec.split(":")[0] for c in CASES} == set()
