"""Plain hits counted in bulk, where no strategy decision can depend on them (issue 35, item 5).

For naive, lock and lock-dc (``NaiveCore`` and ``LockCore`` exactly: a subclass such as XFetch
decides per hit) a GET that finds the value is a hit and nothing more: it changes no state and
its answer depends only on the value being there. Between two herds the value is there until
its expiry, which only a later write moves, and without TTL jitter a later write only moves it
later. So a closed-loop client can run its hits up to just before that expiry as a plain
Python loop (two half round trips and a think time each, drawn as the event-driven path draws
them), record them, and wait once; its first request that could reach the store at or after the
expiry goes through the model as usual. The same distribution, without three simpy events a hit.
"""

from __future__ import annotations

import random
from typing import Any

from simulate.driver import WALL0_NS, SimDriver
from strategies import registry
from strategies.base import HIT
from strategies.core.cacheaside import LockCore, NaiveCore

PLAIN_HIT_CORES = (NaiveCore, LockCore)
SAFETY_S = 1e-6  # a hit must reach the store this long before the expiry instant


def eligible(strategy: Any, label: str) -> bool:
    """Does every hit of ``strategy`` decide nothing (so its hits may be counted in bulk)?"""
    jitter = registry.parse(label).params.get("jitter", 0)
    return type(getattr(strategy, "core", None)) in PLAIN_HIT_CORES and not jitter


def expiry_s(driver: SimDriver, key: str) -> float | None:
    """The simulated instant the cached value of ``key`` expires; None: not cached."""
    item = driver.cache.data.get(key)
    if item is None or item[1] is None or driver.cache.live(key) is None:
        return None
    return float(item[1] * 1_000_000 - WALL0_NS) / 1e9


def hits(driver: SimDriver, key: str, rec: Any, think_s: float, rng: random.Random,
         chunk_s: float) -> float:
    """Record the hits a client starting now makes while the value is surely cached, at most
    ``chunk_s`` ahead; the instant its next request starts (now: none was certain)."""
    now = driver.env.now
    until = expiry_s(driver, key)
    if until is None:
        return now
    horizon, half, t = min(until - SAFETY_S, now + chunk_s), driver.net.half, now
    expovariate, rate, n = rng.expovariate, 1 / think_s if think_s > 0 else 0.0, 0
    while True:
        out = half()
        if t + out >= horizon:
            break
        end = t + out + half()
        rec.add(t, end, HIT)
        n += 1
        t = end + (expovariate(rate) if rate else 0.0)
    driver.cache.commands += n
    return t
