"""What a test of a defence must show (stampede-lab's docs/plugins.md), for singleflight, on a
real Redis started here: under a herd it calls the origin less than no defence; every request
is answered or fails with an error of its own type; its waits are bounded and recorded in the
Probe; prime, cached_version and on_write keep the origin's versions."""

from __future__ import annotations

import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
import stampede_singleflight

import strategies
from coordinator.stack.redis_server import start_redis
from strategies import Deps, Outcome, Probe
from strategies.commands import PlainCommands
from strategies.plugins import load
from strategies.version import stamp

CLIENTS = 16


class Origin:
    """The origin's cost (20 ms) and its count; ``fail`` makes every call fail."""

    def __init__(self, fail: bool = False) -> None:
        self.calls, self.fail, self._mutex = 0, fail, threading.Lock()

    def load(self, key: str, probe: Probe) -> bytes:
        time.sleep(0.02)
        with self._mutex:
            self.calls += 1
        probe.origin_calls += 1
        if self.fail:
            raise ConnectionError("the origin is down")
        return stamp(self.calls, key.encode())


@pytest.fixture(scope="module")
def cache_url() -> Iterator[str]:
    proc, url = start_redis("cache", Path(tempfile.mkdtemp()))
    yield url
    proc.stop()


def herd(name: str, url: str, origin: Origin, **params: object) -> list[tuple[str, Probe]]:
    """CLIENTS threads miss the same key at one instant; each one's outcome (or error type)."""
    client = redis.Redis.from_url(url)
    client.flushdb()
    spec = strategies.from_mapping(name, params)
    strategy = spec.build(Deps(PlainCommands(client), PlainCommands(client), origin, 2000))
    gate, results = threading.Barrier(CLIENTS), []

    def one() -> None:
        probe = Probe()
        gate.wait()
        try:
            results.append((strategy.fetch("hot", probe).name, probe))
        except Exception as exc:  # noqa: BLE001 - the error type is what the test reads
            results.append((type(exc).__name__, probe))

    threads = [threading.Thread(target=one) for _ in range(CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def test_it_loads_as_a_plugin_with_its_version() -> None:
    assert load("stampede_singleflight") == ("0.1.0", ("singleflight",))
    assert stampede_singleflight.__version__ == "0.1.0"


def test_a_herd_makes_one_origin_call_where_no_defence_makes_many(cache_url: str) -> None:
    naive, ours = Origin(), Origin()
    herd("naive", cache_url, naive)
    results = herd("singleflight", cache_url, ours)
    assert naive.calls >= CLIENTS // 2 and ours.calls == 1
    outcomes = sorted(o for o, _ in results)
    assert outcomes.count("FILLED") == 1 and set(outcomes) <= {"FILLED", "WAITED", "HIT"}
    waiters = [p for o, p in results if o == "WAITED"]
    assert waiters and all(p.lock_wait_ns > 0 and p.origin_calls == 0 for p in waiters)
    assert all(p.version_served == 1 for _, p in results)  # every answer is the fill's value


def test_a_failed_call_fails_its_waiters_with_their_own_error(cache_url: str) -> None:
    origin = Origin(fail=True)
    results = herd("singleflight", cache_url, origin)
    kinds = {o for o, _ in results}
    assert "ConnectionError" in kinds and kinds <= {"ConnectionError", "FlightFailed"}
    assert origin.calls < CLIENTS  # the waiters did not each go to the origin


def test_a_wait_is_bounded(cache_url: str) -> None:
    slow = Origin()
    slow.load = lambda key, probe: (time.sleep(0.3), stamp(1, b"v"))[1]  # type: ignore[method-assign]
    results = herd("singleflight", cache_url, slow, max_wait_ms=50)
    timed_out = [p for o, p in results if o == "LockWaitTimeout"]
    assert timed_out and all(p.lock_wait_ns >= 45_000_000 for p in timed_out)


def test_invalid_params_are_refused() -> None:
    with pytest.raises(strategies.InvalidStrategy, match="max_wait_ms=0 is outside"):
        strategies.parse("singleflight:max_wait_ms=0")


def test_prime_cached_version_and_on_write(cache_url: str) -> None:
    client = redis.Redis.from_url(cache_url)
    client.flushdb()
    strategy = strategies.parse("singleflight").build(
        Deps(PlainCommands(client), PlainCommands(client), Origin(), 2000))
    strategy.prime("k", stamp(7, b"v"), int(time.time() * 1000) + 2000)
    assert strategy.cached_version("k") == 7
    probe = Probe()
    assert strategy.fetch("k", probe) is Outcome.HIT and probe.version_served == 7
    strategy.on_write("k", Probe())  # on_write=delete: the next reader fills it
    assert strategy.cached_version("k") is None
