"""two-level in the model (simulate/): its own core on simulated time, lock-dc behind the local
copies (about one origin call an expiry) while the local hits spare the store, its local TTL on
the simulated clock, and an invalidation reaching the other app processes half a round trip
after its publish (simulate.store's pub/sub)."""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

import simpy

from simulate.driver import Network, Origin, SimClock, SimDriver
from simulate.metrics import figures
from simulate.store import SimStore
from simulate.world import WorldSpec, build, replicate
from strategies import Probe
from strategies.core.twolevel import TwoLevelCore

WORLD = WorldSpec("two-level", app_servers=4, clients=10, ttl_s=0.3, think_ms=5.0, expiries=2)
RTT_S = 200e-6


def test_two_level_fills_once_an_expiry_and_serves_local_hits() -> None:
    for seed in range(3):
        rec = replicate(WORLD, seed)
        found = figures(rec, WORLD.expiries, WORLD.ttl_s / 2)
        assert found.events == WORLD.expiries and found.errors == 0, found
        assert found.origin_per_expiry <= 1.5, found
        # local hits never reach the store: far fewer commands than requests (lock-dc: more)
        assert rec.commands < len(rec.outcomes) / 4, (rec.commands, len(rec.outcomes))
    lock_dc = replicate(replace(WORLD, strategy="lock-dc", bulk_hits=False), 0)
    assert lock_dc.commands >= len(lock_dc.outcomes)


def _apps(spec: str, n: int) -> tuple[simpy.Environment, SimStore, list[Any], list[SimDriver]]:
    env = simpy.Environment()
    clock = SimClock(env)
    cache, locks = SimStore(env, clock.wall_ms), SimStore(env, clock.wall_ms)
    origin = Origin(env, n, 4, 0.003, 0.25, random.Random(1))
    built = [build(spec, 10_000, clock, cache, locks, 3.0) for _ in range(n)]
    built[0].prime("k", b"\x00" * 9, clock.wall_ms() + 10_000)
    drivers = [SimDriver(env, (cache, locks), origin, Network(RTT_S, random.Random(i)), i)
               for i in range(n)]
    for driver, strategy in zip(drivers, built, strict=True):
        driver.listen(strategy)
    return env, cache, built, drivers


def _fetch(env: simpy.Environment, driver: SimDriver, strategy: Any) -> Probe:
    probe = Probe()
    env.process(driver.fetch(strategy, "k", probe))
    env.run(until=env.now + 0.01)
    return probe


def test_a_publish_reaches_the_other_process_half_a_round_trip_later() -> None:
    env, cache, (writer, reader), (w_driver, r_driver) = _apps(
        "two-level:local_ttl_ms=60000", 2)
    core: TwoLevelCore = reader.core
    assert _fetch(env, r_driver, reader).local_hit == 0 and "k" in core.local
    assert _fetch(env, r_driver, reader).local_hit == 1
    published: list[float] = []
    publish = cache.publish

    def spied(channel: str, data: Any) -> int:
        published.append(env.now)
        return publish(channel, data)

    cache.publish = spied  # type: ignore[method-assign]
    probe = Probe()
    env.process(w_driver.run(writer.core.fill("k", probe), probe))  # a rewrite in app 0
    while not published:
        env.step()
    assert "k" in core.local  # published, not yet delivered: half a round trip (x 0.5-1.5) away
    env.run(until=published[0] + RTT_S / 4 * 0.99)
    assert "k" in core.local
    env.run(until=published[0] + RTT_S * 3 / 4)
    assert "k" not in core.local
    env.run(until=env.now + 0.01)
    after = _fetch(env, r_driver, reader)
    assert after.local_hit == 0 and after.version_served == probe.version_set


def test_the_local_ttl_runs_on_simulated_time() -> None:
    env, _, (strategy,), (driver,) = _apps("two-level:local_ttl_ms=50", 1)
    assert _fetch(env, driver, strategy).local_hit == 0  # 10 ms later (each _fetch runs 10 ms)
    assert _fetch(env, driver, strategy).local_hit == 1
    env.run(until=env.now + 0.05)
    late = Probe()
    env.process(driver.fetch(strategy, "k", late))
    env.run(until=env.now + 0.01)
    assert late.local_hit == 0 and late.version_served == 0  # read from the store again
