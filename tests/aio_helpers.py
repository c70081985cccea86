"""Herds of coroutines for the asyncio library adapters (adapters/aio), in one event loop.

``herd`` starts N ``fetch`` coroutines of one strategy in the same loop iteration (released at
the same instant, as the threaded tests' barrier does); the origin is a loader that sleeps
(``asyncio.sleep``, as an origin's round trip) and stamps its n-th load as version n.
``python -m tests.aio_herd`` runs one such herd in a process of its own.
"""

from __future__ import annotations

import asyncio
import time

import redis

from adapters.aio import registry
from adapters.aio.base import AsyncDeps, AsyncStrategy
from strategies.base import Outcome, Probe, Servers
from strategies.version import stamp

KEY = "orders:0"
TTL_MS = 60_000
LOAD_S = 0.1  # an origin's cost; long beside 50 coroutines' reads, even on a busy host


class SleepLoader:
    """The origin: ``sleep_s`` per load; its n-th load is version n."""

    def __init__(self, sleep_s: float = LOAD_S) -> None:
        self.sleep_s = sleep_s
        self.calls = 0

    async def load(self, key: str, probe: Probe) -> bytes:
        self.calls += 1
        n = self.calls
        started = time.perf_counter_ns()
        probe.origin_start_ns = time.time_ns()
        await asyncio.sleep(self.sleep_s)
        probe.origin_ns += time.perf_counter_ns() - started
        probe.origin_calls += 1
        return stamp(n, f"{key}:{n}".encode())


class Refreshes:
    """The loads a library ran off the request path, as the driver would record them."""

    def __init__(self) -> None:
        self.probes: list[Probe] = []

    def record(self, key: str, probe: Probe) -> None:
        self.probes.append(probe)


def deps(url: str, loader: SleepLoader, clients: int, refreshes: Refreshes | None = None,
         ttl_ms: int = TTL_MS) -> AsyncDeps:
    """One connection per coroutine plus the pool's slack: ``clients`` sized as the driver will."""
    return AsyncDeps(Servers(url, url, threads=clients), loader, ttl_ms, refreshes)


async def warm(strategy: AsyncStrategy, clients: int) -> None:
    """Open the client's connections first (``clients`` reads at once, of another key), so the
    herd's requests are not spread out by connection set-ups."""
    await asyncio.gather(*(strategy.cached_version("warm-up") for _ in range(clients)))


async def herd(strategy: AsyncStrategy, clients: int,
               key: str = KEY) -> list[tuple[Outcome, Probe]]:
    """``clients`` requests for ``key`` at once; every outcome with its probe."""
    await warm(strategy, clients)
    probes = [Probe() for _ in range(clients)]
    outcomes = await asyncio.gather(*(strategy.fetch(key, p) for p in probes))
    return list(zip(outcomes, probes, strict=True))


def flush_cache(url: str) -> None:
    """Every key gone: a herd starts on a miss, not on the value an earlier herd filled."""
    with redis.Redis.from_url(url) as client:
        client.flushdb()


def run_herd(spec: str, url: str, clients: int, refreshes: Refreshes | None = None,
             load_s: float = LOAD_S,
             flush: bool = False) -> tuple[SleepLoader, list[tuple[Outcome, Probe]]]:
    """One herd of strategy ``spec`` on a missing key (``flush``: deleted first), in a loop of
    its own."""
    loader = SleepLoader(load_s)
    if flush:
        flush_cache(url)

    async def scenario() -> list[tuple[Outcome, Probe]]:
        strategy = registry.build(spec, deps(url, loader, clients, refreshes))
        try:
            return await herd(strategy, clients)
        finally:
            await strategy.aclose()

    return loader, asyncio.run(scenario())


# A connection's handshake (redis-py's HELLO and CLIENT SETINFO/SETNAME, a script's first load)
# and the test's own commands: not the requests'.
NOT_REQUESTS = ("hello", "client|", "script|", "config|", "info")


def commands_per_request(client: redis.Redis, requests: int) -> float:
    """The cache commands since the server's last ``CONFIG RESETSTAT``, per request."""
    stats = client.info("commandstats")
    return sum(int(v["calls"]) for name, v in stats.items()
               if not name.removeprefix("cmdstat_").startswith(NOT_REQUESTS)) / requests


def counts(results: list[tuple[Outcome, Probe]]) -> dict[str, int]:
    found: dict[str, int] = {}
    for outcome, _ in results:
        found[outcome.name.lower()] = found.get(outcome.name.lower(), 0) + 1
    return found
