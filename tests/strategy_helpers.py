"""Test helpers for strategies against real Redis: a loader that costs time, a herd release."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import redis

import strategies
from model.lean import LeanCommands
from strategies import Deps, Loader, Outcome, Probe, close_strategy
from strategies.commands import Commands, PlainCommands
from strategies.version import stamp


def commands_at(url: str, path: str) -> Commands:
    """A strategy's Commands to ``url`` on ``path`` (``pooled`` or ``lean``), e.g. in a child
    process."""
    if path == "pooled":
        return PlainCommands(redis.Redis.from_url(url))
    return LeanCommands.from_url(url, 256)


class MakeCommands:
    """The ``commands`` fixture (tests/conftest.py), once per path: ``commands(cache)`` is a
    strategy's Commands to the server of a test's client, the plain client itself (``pooled``)
    or the lean path on connections of its own (``lean``, closed after the test)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._made: list[Commands] = []

    def __call__(self, client: redis.Redis) -> Commands:
        if self.path == "pooled":
            return PlainCommands(client)
        pool = client.connection_pool
        lean = LeanCommands(redis.ConnectionPool(connection_class=pool.connection_class,
                                                 max_connections=4, **pool.connection_kwargs), 256)
        self._made.append(lean)
        return lean

    def close(self) -> None:
        for made in self._made:
            made.close()


class SleepLoader:
    """Simulates the origin's cost (the thing under test is the cache logic on real Redis).
    Its n-th load is version n of the value."""

    def __init__(self, sleep_s: float = 0.02) -> None:
        self.sleep_s = sleep_s
        self.calls = 0
        self._mutex = threading.Lock()

    def load(self, key: str, probe: Probe) -> bytes:
        started = time.perf_counter_ns()
        probe.origin_start_ns = time.time_ns()
        time.sleep(self.sleep_s)
        with self._mutex:
            self.calls += 1
            n = self.calls
        probe.origin_ns += time.perf_counter_ns() - started
        probe.origin_calls += 1
        return stamp(n, f"{key}:{n}".encode())


class StampedLoader(SleepLoader):
    """Records when the value was computed: the filler writes it and wakes the waiters next,
    so a delay measured from here also counts the filler's SET and wake-up."""

    def __init__(self, sleep_s: float) -> None:
        super().__init__(sleep_s)
        self.loaded_ns: list[int] = []

    def load(self, key: str, probe: Probe) -> bytes:
        value = super().load(key, probe)
        self.loaded_ns.append(time.perf_counter_ns())
        return value


def resume_delays_ns(text: str, deps: Callable[[Loader], Deps], waiters: int, load_s: float,
                     key: str = "orders:0", connect: Sequence[Commands] = ()) -> list[int]:
    """Herd ``waiters`` + 1 clients of strategy ``text`` on a missing key; one fills (a load of
    ``load_s``), the others wait; return each waiter's return minus the end of the fill."""
    loader = StampedLoader(load_s)
    strategy = strategies.parse(text).build(deps(loader))
    returned: dict[int, int] = {}

    def fetch(probe: Probe) -> Outcome:
        outcome = strategy.fetch(key, probe)
        returned[id(probe)] = time.perf_counter_ns()
        return outcome

    try:
        results = herd(fetch, threads=waiters + 1, connect=connect)
    finally:
        close_strategy(strategy)
    outcomes = [o for o, _ in results]
    assert loader.calls == 1, f"{loader.calls} fills ({outcomes})"
    assert outcomes.count(Outcome.FILLED) == 1
    assert outcomes.count(Outcome.WAITED) == waiters  # every waiter saw the miss and waited
    filled_ns = loader.loaded_ns[0]
    return sorted(returned[id(p)] - filled_ns for o, p in results if o is Outcome.WAITED)


def herd(fetch: Callable[[Probe], Outcome], threads: int = 50,
         connect: Sequence[Commands] = ()) -> list[tuple[Outcome, Probe]]:
    """Release ``threads`` fetches together; return each outcome with its probe. Each thread
    first connects ``connect`` (the lean path's own connections), as a worker's client thread
    does before the start instant: else the herd is spread over 50 connection set-ups."""
    barrier = threading.Barrier(threads)
    results: list[tuple[Outcome, Probe]] = []
    errors: list[BaseException] = []
    mutex = threading.Lock()

    def one() -> None:
        probe = Probe()
        for commands in connect:
            commands.connect()
        barrier.wait()
        try:
            outcome = fetch(probe)
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            with mutex:
                errors.append(exc)
            return
        with mutex:
            results.append((outcome, probe))

    workers = [threading.Thread(target=one) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(30)
    assert not errors, errors[:3]
    assert len(results) == threads
    return results


def two_level_reader(url: str, key: str, out: Any, path: str = "pooled") -> None:
    """Child process: cache ``key`` locally, then report when an invalidation drops it."""
    from strategies import Deps
    from strategies.twolevel import TwoLevel, TwoLevelParams

    cache = commands_at(url, path)
    strategy = TwoLevel(Deps(cache, cache, SleepLoader(0.001), 60_000),
                        TwoLevelParams(local_ttl_ms=60_000))
    try:
        strategy.fetch(key, Probe())
        probe = Probe()
        strategy.fetch(key, probe)
        out.put(("ready", probe.local_hit))
        deadline = time.time() + 10
        while key in strategy.local and time.time() < deadline:
            time.sleep(0.001)
        dropped_at = None if key in strategy.local else time.time()
        probe = Probe()
        strategy.fetch(key, probe)
        out.put(("dropped", dropped_at, probe.local_hit, strategy.local[key][1]))
    finally:
        strategy.close()
        cache.close()


def two_level_rows(url: str, key: str, out: Any, seconds: float, path: str = "pooled") -> None:
    """Child process: read ``key`` through two-level for ``seconds`` (after saying it is ready),
    every read a row of the real recorder; the rows go back encoded."""
    from results.store import transport
    from strategies import Deps
    from strategies.twolevel import TwoLevel, TwoLevelParams
    from worker.recorder import Recorder

    cache = commands_at(url, path)
    strategy = TwoLevel(Deps(cache, cache, SleepLoader(0.001), 60_000),
                        TwoLevelParams(local_ttl_ms=60_000))
    rows = Recorder(0, [key])
    try:
        strategy.fetch(key, Probe())
        out.put("ready")
        deadline = time.time() + seconds
        while time.time() < deadline:
            probe, t0 = Probe(), time.time_ns()
            outcome = strategy.fetch(key, probe)
            rows.add(0, t0, time.time_ns() - t0, outcome, probe, None)
            time.sleep(0.0005)
        out.put(transport.encode(rows.to_batch()))
    finally:
        strategy.close()
        cache.close()
