"""Plain hits counted in bulk, where no strategy decision can depend on them (issue 35, item 5).

For naive, lock and lock-dc (``NaiveCore`` and ``LockCore`` exactly: a subclass such as XFetch
decides per hit) a GET that finds the value is a hit and nothing more: it changes no state and
its answer depends only on the value being there. Between two herds the value is there until
its expiry, which only a later write moves, and without TTL jitter a later write only moves it
later. So a closed-loop client can draw its hits up to just before that expiry in one numpy
batch (two half round trips and a think time each, from the distributions the event-driven path
draws from, cumulated, cut where a hit would reach the store at the horizon), count them in a
latency histogram (``simulate.latency``) and wait once; its first request that could reach the
store at or after the expiry goes through the model as usual. The same distribution, without
three simpy events and a row a hit.

XFetch and xfetch-lock (``XFetchCore``, ``XFetchLockCore`` exactly) decide on a hit only by
their early window, whose chance falls as exp(-r / (delta x beta)) r seconds before the expiry:
their batches stop ``WINDOW_DELTAS`` delta x beta before it (``lead``), and inside that window
every request, its ``random()`` draw included, goes through the model.

With an interpreter per app process (``simulate.cpu``) a hit also waits for its turn after its
reply. A hit in bulk books none: it takes the queue's steady-state wait and its hold
(``Draws.handled_s``), and every batch stops ``settle_s`` (a few client cycles) earlier, so
that the queue the expiry meets is the one the per-request path builds, not an empty one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from simulate.driver import WALL0_NS, SimDriver
from simulate.latency import Counted
from strategies import envelope, registry
from strategies.core.cacheaside import LockCore, NaiveCore
from strategies.core.xfetch import XFetchCore, XFetchLockCore

PLAIN_HIT_CORES = (NaiveCore, LockCore)
XFETCH_CORES = (XFetchCore, XFetchLockCore)
SAFETY_S = 1e-6  # a hit must reach the store this long before the expiry instant
# XFetch's window: a hit this many delta x beta before the expiry refreshes with probability
# exp(-36) < 2.4e-16, so over a billion hits the chance that one of them would have is < 1e-6
WINDOW_DELTAS = 36.0

BATCH_HITS = 2048  # at most about this many hits a batch: a client's last batch stays in memory

Lead = Callable[[bytes], float]  # the cached value -> how long before its expiry hits decide


def lead(strategy: Any, label: str, floor_s: float = 0.0, settle_s: float = 0.0) -> Lead | None:
    """How long before the value's expiry the hits of ``strategy`` start to decide (from then
    on they go through the model one by one); None: every hit decides (never in bulk). XFetch's
    window is taken for a delta of at least ``floor_s`` (the world's origin median): a wider
    window is only slower, and the primed value's delta is real time (``XFetch.prime``
    measures its loader), which would shift a batch's cut from one run to the next. Every
    lead is ``settle_s`` longer: the time the interpreter's queue takes to build (module doc)."""
    if registry.parse(label).params.get("jitter", 0):
        return None
    core = getattr(strategy, "core", None)
    safety = SAFETY_S + settle_s
    if type(core) in PLAIN_HIT_CORES:
        return lambda raw: safety
    if isinstance(core, XFETCH_CORES) and type(core) in XFETCH_CORES:  # isinstance: for mypy
        window = WINDOW_DELTAS * core._beta  # the early window scales with delta x beta
        return lambda raw: safety + window * max(envelope.unpack(raw).delta_s, floor_s)
    return None


def chunk_s(ttl_s: float, rtt_s: float, think_s: float) -> float:
    """How far ahead a client's batch reaches at most: half a TTL, or ``BATCH_HITS`` requests
    if fewer (a client's last batch is kept until its next; 10,000 clients of 2,048 hits hold
    about 330 MB), never less than 10 round trips. A longer batch is fewer numpy calls; where
    it stops changes no draw's distribution (each batch starts where the last one ended)."""
    return max(10 * rtt_s, min(ttl_s / 2, BATCH_HITS * (rtt_s + think_s)))


def eligible(strategy: Any, label: str) -> bool:
    """May any hit of ``strategy`` be counted in bulk (one far enough from its expiry)?"""
    return lead(strategy, label) is not None


def horizon_s(driver: SimDriver, key: str, ahead: Lead) -> float | None:
    """The simulated instant from which a hit of ``key`` may decide; None: not cached."""
    item = driver.cache.data.get(key)
    if item is None or item[1] is None or driver.cache.live(key) is None:
        return None
    return float(item[1] * 1_000_000 - WALL0_NS) / 1e9 - ahead(item[0])


class Draws:
    """One client's draws for its hits in bulk, from a numpy generator of its own (seeded from
    the client's ``random.Random``): each half round trip ``rtt / 2`` times a uniform in
    [0.5, 1.5] and each think time exponential, as ``Network.half`` and the client draw them;
    after its reply each hit spends ``handled_s`` (its wait for the interpreter and its hold,
    ``simulate.cpu``; 0 without one)."""

    def __init__(self, half_s: float, think_s: float, seed: int, client: int,
                 handled_s: float = 0.0) -> None:
        self.half_s, self.think_s, self.client = half_s, think_s, client
        self.handled_s = handled_s
        self._gen = np.random.default_rng(seed)
        self._cycle_s = 2 * half_s + handled_s + think_s  # one hit and its think, on average

    def batch(self, t: float, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``n`` hits in a row from ``t``: each one's start (and the next request's, n + 1),
        its arrival at the store and its end."""
        gen, half = self._gen, self.half_s
        out = half * (0.5 + gen.random(n))
        took = out + half * (0.5 + gen.random(n)) + self.handled_s
        cycle = took + gen.exponential(self.think_s, n) if self.think_s > 0 else took
        starts = np.empty(n + 1)
        starts[0] = 0.0
        np.cumsum(cycle, out=starts[1:])
        starts += t
        return starts, starts[:-1] + out, starts[:-1] + took

    def until(self, t: float, horizon: float) -> tuple[np.ndarray, np.ndarray, float]:
        """The hits that start at ``t`` one after another and reach the store before
        ``horizon``: their ends, their latencies and the instant the next request starts."""
        ends: list[np.ndarray] = []
        took: list[np.ndarray] = []
        while self._cycle_s > 0:
            n = int((horizon - t) / self._cycle_s * 1.05) + 16
            starts, arrive, end = self.batch(t, n)
            k = int(np.searchsorted(arrive, horizon, side="left"))  # the arrivals rise
            ends.append(end[:k])
            took.append(end[:k] - starts[:k])
            t = float(starts[k])
            if k < n:
                break
        if not ends:
            return np.empty(0), np.empty(0), t
        return np.concatenate(ends), np.concatenate(took), t


def hits(driver: SimDriver, key: str, counted: Counted, draws: Draws, chunk_s: float,
         ahead: Lead) -> float:
    """Count the hits a client starting now makes while the value is surely cached and no hit
    decides, at most ``chunk_s`` ahead; the instant its next request starts (now: none)."""
    now = driver.env.now
    until = horizon_s(driver, key, ahead)
    if until is None or until <= now:
        counted.put(draws.client, _NONE, _NONE)
        return now
    ends, took, t = draws.until(now, min(until, now + chunk_s))
    counted.put(draws.client, ends, took)
    driver.cache.commands += int(ends.size)
    return t


_NONE = np.empty(0)
