"""Priming: every primed key stored before a trial, to expire at the trial's first expiry.

With a strategy parameter ``jitter`` (TTL drawn from ``ttl * (1 +- jitter)``), the first
expiries are jittered the same way, so the keys of ``many:K`` do not all expire together
(experiment 001). Without it they expire in the same millisecond.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable

import redis
from psycopg_pool import ConnectionPool

from adapters.aio import registry as aio_registry
from adapters.aio.base import AsyncDeps
from coordinator.caches import RunCaches
from model.origin import OriginShape, ValueShaper
from model.origins import loader_for
from model.workload import Endpoint, Workload
from strategies import Deps, Probe, StrategySpec, close_strategy
from strategies.base import CacheServer, Servers
from strategies.commands import PlainCommands


def first_expiry_ms(window_start_ns: int, ttl_ms: int, jitter: float, rng: random.Random) -> int:
    """Half a TTL into the window (one expiry mid-period), moved by up to +-jitter x TTL."""
    offset = rng.uniform(-jitter, jitter) * ttl_ms if jitter else 0.0
    return window_start_ns // 10**6 + ttl_ms // 2 + round(offset)


class Primer:
    def __init__(self, workload: Workload, caches: RunCaches, locks: redis.Redis,
                 pool: ConnectionPool | None, shape: OriginShape,
                 say: Callable[[str], None] = lambda _: None, load: bool = True) -> None:
        """``load`` False: nothing is read from the origin, so nothing is primed (a raw HTTP
        target's trials: nothing of ours reads the cache)."""
        self.workload, self.caches, self.locks = workload, caches, PlainCommands(locks)
        shaper = ValueShaper(workload.value_bytes, workload.compress)
        self.loaders = {ep.name: loader_for(ep, workload.origin, pool, shape, shaper, 1)
                        for ep in workload.endpoints} if load else {}
        # Loaded once, before any trial is placed on the clock: 24 heavy rankings take seconds,
        # which must not eat into a trial's lead time (its sends would start out late).
        self.values: dict[str, bytes] = {}
        self.unprimed: dict[str, str] = {}  # the user's origin failed for these keys: cold
        for ep in workload.endpoints if load else ():
            for key in ep.key_names() if ep.prime else ():
                self._load(ep, key, say)

    def _load(self, ep: Endpoint, key: str, say: Callable[[str], None]) -> None:
        """A key's value, once. The built-in origin failing fails the run; the user's own (an
        HTTP service answering 503...) leaves the key cold, and says so: its trials start with
        the herd of a miss, whose failures are error rows."""
        if self.workload.origin.builtin:
            self.values[key] = self.loaders[ep.name].load(key, Probe())
            return
        try:
            self.values[key] = self.loaders[ep.name].load(key, Probe())
        except Exception as exc:  # noqa: BLE001 - not measured: reported, the key starts cold
            self.unprimed[key] = f"{type(exc).__name__}: {exc}"[:200]
            say(f"priming: {ep.name} key {key!r} not primed ({self.unprimed[key]}): its trials "
                "start cold")

    def prime(self, spec: StrategySpec, window_start_ns: int, trial: int) -> int:
        """Prime every endpoint that asks for it; returns the number of keys stored."""
        if not self.loaders:  # nothing was loaded: nothing of ours reads this cache
            return 0
        jitter = float(spec.params.get("jitter", 0.0))
        rng = random.Random(self.workload.seed * 1_000_003 + trial)
        stored = 0
        for ep in self.workload.endpoints:
            if ep.prime:
                stored += self._prime_endpoint(ep, spec, window_start_ns, jitter, rng)
        return stored

    def _prime_endpoint(self, ep: Endpoint, spec: StrategySpec, window_start_ns: int,
                        jitter: float, rng: random.Random) -> int:
        keys = [k for k in ep.key_names() if k in self.values]
        if spec.is_async:  # an asyncio library: primed in its own format, by its own client
            expiries = [first_expiry_ms(window_start_ns, ep.ttl_ms, jitter, rng) for _ in keys]
            asyncio.run(self._aprime(ep, spec, dict(zip(keys, expiries, strict=True))))
            return len(keys)
        strategy = spec.build(self.deps(ep, spec.cache_server))
        try:
            for key in keys:
                strategy.prime(key, self.values[key], first_expiry_ms(window_start_ns, ep.ttl_ms,
                                                                      jitter, rng))
        finally:
            close_strategy(strategy)  # two-level's listener thread
        return len(keys)

    async def _aprime(self, ep: Endpoint, spec: StrategySpec, expiries: dict[str, int]) -> None:
        servers = Servers(self.caches.urls[spec.cache_server], self.caches.services.lock_url)
        strategy = aio_registry.build(spec.label, AsyncDeps(servers, _NoLoads(), ep.ttl_ms))
        try:
            for key, expire_at_ms in expiries.items():
                await strategy.prime(key, self.values[key], expire_at_ms)
        finally:
            await strategy.aclose()

    def deps(self, ep: Endpoint, kind: CacheServer) -> Deps:
        """The coordinator's connections for one endpoint: priming and the servers' check (a
        library's strategy builds its own clients from ``servers``)."""
        servers = Servers(self.caches.urls[kind], self.caches.services.lock_url)
        return Deps(self.caches.commands(kind), self.locks, self.loaders[ep.name], ep.ttl_ms,
                    servers=servers)


class _NoLoads:
    """Priming's async loader: the values are loaded before (``Primer.values``), never here."""

    async def load(self, key: str, probe: Probe) -> bytes:
        raise RuntimeError(f"priming loads nothing through the library ({key!r})")
