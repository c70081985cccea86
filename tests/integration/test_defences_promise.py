"""What two defences promise beyond "one origin call", on real Valkey/Redis servers.

The herd test (test_strategies_redis) passes for ``wake=notify`` with the wake-up broken (the
BLPOP times out and the value is there) and cannot tell ``local-lock`` from ``lock-dc``. These
tests measure the promise itself: notify wakes the waiters at the fill, and local-lock sends
one lock attempt per process, not one per thread.
"""

from __future__ import annotations

import multiprocessing
import statistics
import threading
from collections.abc import Callable
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier as ProcessBarrier
from typing import Any

import redis

import strategies
from strategies import Deps, Outcome, Probe
from strategies.commands import Commands
from tests.strategy_helpers import MakeCommands, SleepLoader, commands_at, resume_delays_ns

KEY = "orders:0"

# --- wake=notify: waiters resume at the fill, not at the next poll or BLPOP timeout ---------

LOAD_S = 0.2  # a slow fill: far longer than the resume bound below
WAITERS = 6
# notify: every waiter is back within 50 ms of the fill. Each waiter wakes the next (BLPOP, then
# RPUSH of the token), so the last one needs WAITERS thread wake-ups: a few ms on an idle host,
# up to ~70 ms for 10 waiters on a 2-CPU host at load 18, hence few waiters and this bound. A
# broken wake-up resumes at the BLPOP timeout (1 s, ~800 ms after the fill).
RESUME_BOUND_NS = 50_000_000
POLL_MS = 300  # the contrast: a poller looks at ~300 ms, ~100 ms after the fill
SLOW_OK = "max_wait_ms=20000,lock_ttl_ms=20000"  # the waits themselves never time out


def lock_dc_delays_ns(text: str, cache: Commands, locks: Commands) -> list[int]:
    """Each waiter's return after the fill, for a lock-dc variant on ``cache`` and ``locks``."""
    return resume_delays_ns(text, lambda loader: Deps(cache, locks, loader, 60_000), WAITERS,
                            LOAD_S, KEY, connect=(cache, locks))


def resumed_at_the_fill(delays_ns: list[int]) -> bool:
    """The notify promise: every waiter returns within RESUME_BOUND_NS of the fill."""
    return max(delays_ns) < RESUME_BOUND_NS


def ms(values: list[int]) -> list[float]:
    return [round(v / 1e6, 1) for v in values]


def test_notify_wakes_every_waiter_at_the_fill(cache: redis.Redis, locks: redis.Redis,
                                               commands: MakeCommands) -> None:
    delays = lock_dc_delays_ns(f"lock-dc:wake=notify,{SLOW_OK}", commands(cache), commands(locks))
    assert resumed_at_the_fill(delays), (
        f"waiters resumed {ms(delays)} ms after a {LOAD_S * 1000:g} ms fill; notify promises "
        f"< {RESUME_BOUND_NS / 1e6:g} ms (the poll interval and BLPOP timeout are far longer)")
    assert min(delays) > 0  # no waiter returned before the value existed


def test_the_resume_check_fails_for_a_poller(cache: redis.Redis, locks: redis.Redis,
                                             commands: MakeCommands) -> None:
    """The same check on waiters that are not woken (poll every 300 ms): it must fail, so it
    can tell a working wake-up from one that the poll or the BLPOP timeout covers up."""
    delays = lock_dc_delays_ns(f"lock-dc:wake=poll,poll_ms={POLL_MS},{SLOW_OK}", commands(cache),
                              commands(locks))
    assert not resumed_at_the_fill(delays), ms(delays)
    assert statistics.median(delays) > RESUME_BOUND_NS, ms(delays)


# --- local-lock: one lock attempt per process per expiry -------------------------------------

PROCS, THREADS = 3, 8
HERD_LOAD_S = 0.2
# One SET per client that misses: a waiter that lost the lock pauses once (poll_ms is longer
# than the fill) and then finds the value, so it never asks for the lock a second time.
ONE_TRY = "poll_ms=600,max_wait_ms=5000,lock_ttl_ms=5000"


def lock_attempts(locks: redis.Redis) -> int:
    """The lock store's own count of SET commands (OwnedLock.try_acquire is SET NX PX)."""
    stats: dict[str, Any] = locks.info("commandstats")
    return int(stats.get("cmdstat_set", {}).get("calls", 0))


def herd_process(text: str, cache_url: str, lock_url: str, together: ProcessBarrier,
                 out: Queue[tuple[list[str], list[str], int]], path: str) -> None:
    """Child process: THREADS threads of one worker fetch KEY at once, released together with
    the other processes; report outcomes, errors and origin calls."""
    cache = commands_at(cache_url, path)
    locks = commands_at(lock_url, path)
    loader = SleepLoader(HERD_LOAD_S)
    strategy = strategies.parse(text).build(Deps(cache, locks, loader, 60_000))
    release = threading.Barrier(THREADS + 1)
    outcomes: list[str] = []
    errors: list[str] = []
    mutex = threading.Lock()

    def client() -> None:
        probe = Probe()
        cache.connect()  # as a worker's client thread does before the start instant
        locks.connect()
        release.wait(30)
        try:
            label = strategy.fetch(KEY, probe).name
        except Exception as exc:  # noqa: BLE001 - reported to the parent, which asserts none
            with mutex:
                errors.append(f"{type(exc).__name__}: {exc}")
            return
        with mutex:
            outcomes.append(label)

    threads = [threading.Thread(target=client) for _ in range(THREADS)]
    for t in threads:
        t.start()
    try:
        together.wait(60)  # every process is connected and its threads are waiting
        release.wait(30)
        for t in threads:
            t.join(30)
    finally:
        out.put((outcomes, errors, loader.calls))
        cache.close()
        locks.close()


def herd_processes(text: str, cache_url: str, lock_url: str, path: str
                   ) -> tuple[list[list[str]], int]:
    """PROCS spawned processes x THREADS threads on the expired KEY; per-process outcomes and
    the total number of origin calls."""
    ctx = multiprocessing.get_context("spawn")
    together = ctx.Barrier(PROCS)
    out: Queue[tuple[list[str], list[str], int]] = ctx.Queue()
    procs = [ctx.Process(target=herd_process, args=(text, cache_url, lock_url, together, out, path))
             for _ in range(PROCS)]
    for p in procs:
        p.start()
    try:
        reports = [out.get(timeout=90) for _ in procs]
    finally:
        for p in procs:
            p.join(10)
            if p.is_alive():
                p.kill()
    errors = [e for _, errs, _ in reports for e in errs]
    assert not errors, errors[:3]
    assert all(len(outcomes) == THREADS for outcomes, _, _ in reports)
    return [outcomes for outcomes, _, _ in reports], sum(calls for _, _, calls in reports)


def test_local_lock_sends_one_lock_attempt_per_process(
        redis_server: Callable[[str], str], cache: redis.Redis, locks: redis.Redis,
        commands: MakeCommands) -> None:
    cache_url, lock_url = redis_server("cache"), redis_server("lock-store")
    before = lock_attempts(locks)
    per_process, origin_calls = herd_processes(f"local-lock:{ONE_TRY}", cache_url, lock_url,
                                               commands.path)
    attempts = lock_attempts(locks) - before
    assert origin_calls == 1
    assert attempts == PROCS, (
        f"{attempts} lock attempts from {PROCS} processes x {THREADS} threads: local-lock "
        f"promises one per process per expiry ({per_process})")


def test_lock_dc_sends_one_lock_attempt_per_thread(
        redis_server: Callable[[str], str], cache: redis.Redis, locks: redis.Redis,
        commands: MakeCommands) -> None:
    """The contrast that makes the count above mean something: without the in-process
    single flight every thread that misses asks the lock store."""
    cache_url, lock_url = redis_server("cache"), redis_server("lock-store")
    before = lock_attempts(locks)
    per_process, origin_calls = herd_processes(f"lock-dc:{ONE_TRY}", cache_url, lock_url,
                                               commands.path)
    attempts = lock_attempts(locks) - before
    misses = sum(o != Outcome.HIT.name for outcomes in per_process for o in outcomes)
    assert origin_calls == 1
    assert attempts == misses  # one SET per client that missed
    assert attempts >= PROCS * THREADS - PROCS, (attempts, per_process)
