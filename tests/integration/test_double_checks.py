"""The steps a herd test leaves to chance, made to happen on purpose (real Redis): lock-dc's
second read after taking the lock, and xfetch-lock's early refresh under the lock.

Another client's move is put exactly between two steps of the strategy: right after the
strategy's first GET, the test writes what that other client would have written. Each test has
the variant without the step as its contrast, which must answer differently.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
import redis

import strategies
from strategies import Deps, Outcome, Probe, envelope
from strategies.commands import Commands, PlainCommands
from strategies.locking import lock_key
from strategies.version import stamp
from tests.strategy_helpers import SleepLoader

KEY = "orders:0"
TTL_MS = 60_000


class AfterFirstGet:
    """The cache's commands, with ``then`` run once right after the first GET returns."""

    def __init__(self, inner: Commands, then: Callable[[], object]) -> None:
        self._inner = inner
        self._then: Callable[[], object] | None = then

    def get(self, key: str) -> bytes | None:
        value = self._inner.get(key)
        if self._then is not None:
            then, self._then = self._then, None
            then()
        return value

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def build(text: str, cache: Any, locks: redis.Redis, loader: SleepLoader) -> strategies.Strategy:
    return strategies.parse(text).build(Deps(cache, PlainCommands(locks), loader, TTL_MS))


# --- lock-dc: a miss whose value came back before its lock ----------------------------------

@pytest.mark.parametrize(("text", "outcome", "fills"), [("lock-dc", Outcome.WAITED, 0),
                                                        ("lock", Outcome.FILLED, 1)])
def test_a_client_that_read_a_miss_finds_the_value_after_taking_the_lock(
        text: str, outcome: Outcome, fills: int, cache: redis.Redis, locks: redis.Redis) -> None:
    """Between this client's miss and its lock, another client filled the key and released
    its lock. lock-dc reads again under the lock and serves that value; plain lock (the same
    without the second read) computes it a second time: experiment 000's 1.5 fills."""
    other = stamp(5, b"filled by another client")
    commands = AfterFirstGet(PlainCommands(cache), lambda: cache.set(KEY, other, px=TTL_MS))
    loader = SleepLoader(0.001)
    probe = Probe()
    assert build(text, commands, locks, loader).fetch(KEY, probe) is outcome
    assert loader.calls == fills
    assert probe.version_served == (5 if fills == 0 else 1)


# --- xfetch-lock: the early refresh is under the lock -----------------------------------------

@pytest.fixture
def early(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every reader decides to refresh early (rand = 1e-9: -ln(rand) = 20.7, times delta)."""
    monkeypatch.setattr(strategies.xfetch, "draw", lambda: 1e-9)


def _fresh(cache: redis.Redis, left_s: float = 30.0, version: int = 3) -> int:
    """A value that expires in ``left_s`` with a delta of 10 s: an early refresh is due."""
    expiry_us = int((time.time() + left_s) * 1e6)
    cache.set(KEY, envelope.pack(stamp(version, b"current"), expiry_us, 10.0), px=TTL_MS)
    return expiry_us


@pytest.mark.usefixtures("early")
@pytest.mark.parametrize(("text", "outcome", "fills"), [("xfetch-lock", Outcome.HIT, 0),
                                                        ("xfetch", Outcome.FILLED, 1)])
def test_an_early_refresh_is_left_to_the_lock_holder(text: str, outcome: Outcome, fills: int,
                                                      cache: redis.Redis,
                                                      locks: redis.Redis) -> None:
    """Another reader holds the lock (it is refreshing): xfetch-lock serves the fresh value at
    once; xfetch (the same without the lock) goes to the origin too."""
    _fresh(cache)
    locks.set(lock_key(KEY), b"another reader", px=TTL_MS)
    loader = SleepLoader(0.001)
    probe = Probe()
    assert build(text, PlainCommands(cache), locks, loader).fetch(KEY, probe) is outcome
    assert loader.calls == fills
    assert probe.version_served == (3 if fills == 0 else 1)


@pytest.mark.usefixtures("early")
def test_the_lock_holder_refreshes_early_and_names_the_cycle(cache: redis.Redis,
                                                             locks: redis.Redis) -> None:
    expiry_us = _fresh(cache)
    loader = SleepLoader(0.001)
    probe = Probe()
    assert build("xfetch-lock", PlainCommands(cache), locks, loader).fetch(KEY, probe) \
        is Outcome.FILLED
    assert loader.calls == 1
    assert probe.refresh_of_ns == expiry_us * 1000  # the refresh cycle of the value it replaced
    assert locks.get(lock_key(KEY)) is None  # released


@pytest.mark.usefixtures("early")
def test_an_early_refresh_renewed_meanwhile_is_served_not_repeated(cache: redis.Redis,
                                                                   locks: redis.Redis) -> None:
    """Between this reader's look and its lock, another reader refreshed: xfetch-lock's second
    read under the lock sees the new generation and serves it."""
    _fresh(cache)
    commands = AfterFirstGet(PlainCommands(cache), lambda: _fresh(cache, 60.0, version=4))
    loader = SleepLoader(0.001)
    probe = Probe()
    assert build("xfetch-lock", commands, locks, loader).fetch(KEY, probe) is Outcome.HIT
    assert loader.calls == 0
    assert probe.version_served == 4
