"""The modelled store (simulate/store.py): expiry on the simulated clock, BLPOP woken by a push
or ended by its timeout, the cores' scripts by their semantics, and nothing guessed."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest
import simpy

from simulate.driver import SimClock
from simulate.store import NotModelled, SimStore
from strategies.core.flight import RELEASE
from strategies.core.lease import GET_OR_LEASE, SET_WITH_LEASE


def world() -> tuple[simpy.Environment, SimStore]:
    env = simpy.Environment()
    return env, SimStore(env, SimClock(env).wall_ms)


def test_a_value_expires_by_px_on_the_simulated_clock() -> None:
    env, store = world()
    assert store.set("k", b"v", px=100) and not store.set("k", b"w", px=100, nx=True)
    env.run(until=0.099)
    assert store.get("k") == b"v"
    env.run(until=0.100)
    assert store.get("k") is None and store.set("k", b"w", px=100, nx=True)


def test_blpop_is_woken_by_a_push_and_ends_at_its_timeout() -> None:
    env, store = world()
    got: list[Any] = []

    def waiter(timeout: float) -> Generator[simpy.Event, Any, None]:
        popped = store.wait_pop("wake")
        yield popped | env.timeout(timeout)
        if not popped.triggered:
            store.give_up("wake", popped)
        got.append((env.now, popped.value if popped.triggered else None))

    def pusher() -> Generator[simpy.Event, Any, None]:
        yield env.timeout(0.5)
        store.rpush("wake", b"1")

    env.process(waiter(1.0))
    env.process(waiter(0.2))
    env.process(pusher())
    env.run()
    assert got == [(0.2, None), (0.5, b"1")]
    assert store.live("wake") is None  # the one token went to the one waiter left


def test_the_scripts_by_their_semantics() -> None:
    _, store = world()
    store.set("lock:k", b"mine", px=1000)
    release = store.script(RELEASE)
    assert release(["lock:k"], [b"theirs"]) == 0 and release(["lock:k"], [b"mine"]) == 1
    keys = ["k", "lease:k", "stale:k"]
    assert store.script(GET_OR_LEASE)(keys, [b"t1", 500]) == [1]
    assert store.script(GET_OR_LEASE)(keys, [b"t2", 500]) == [3]
    assert store.script(SET_WITH_LEASE)(keys, [b"t2", b"v", 1000, 0, b""]) == 0
    assert store.script(SET_WITH_LEASE)(keys, [b"t1", b"v", 1000, 500, b"s"]) == 1
    assert store.script(GET_OR_LEASE)(keys, [b"t3", 500]) == [0, b"v"]
    assert store.get("stale:k") == b"s" and store.live("lease:k") is None


def test_what_the_model_does_not_know_it_refuses() -> None:
    _, store = world()
    with pytest.raises(NotModelled):
        store.script("return 1")
    with pytest.raises(NotModelled):
        store.command(("INCR", "k"))
    store.pipeline(("SET", "k", b"v", "PX", 50), ("RPUSH", "l", b"1"), ("PEXPIRE", "l", 10))
    assert store.get("k") == b"v" and store.lpop("l") == b"1"
