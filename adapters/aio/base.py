"""The async strategy contract: the sync one (strategies.base.Strategy) with awaitable methods.

An ``AsyncStrategy`` answers one request for one key inside an asyncio event loop, with the same
``Probe`` and the same ``Outcome`` as a sync strategy; it is built from an ``AsyncDeps`` (the
servers' URLs, the TTL, an async loader). The library adapters of this room bring their own
clients (the library's), so ``AsyncDeps`` carries URLs rather than commands; the asyncio driver
that will host our own strategies behind this contract (issue 34, item 1) may add its commands
beside them. Nothing here knows Celery, threads or Parquet.

- ``fetch`` answers a request; it raises on failure (the caller records an error row).
- ``prime`` stores a value in the strategy's own format so that it expires at ``expire_at_ms``
  (for a library with an expiry of its own, its soft or early point).
- ``on_write`` brings the cache in line after an origin write: the library's own delete.
- ``cached_version`` is the origin version the cache server holds for a key (None: nothing).
- ``aclose`` closes the library's clients.

A load that a library runs off the request path (cashews ``early``'s background refresh,
``hit``'s ``update_after``) is made with a probe of its own and handed to
``AsyncDeps.refreshes.record`` once done: a row of its own (``op = "refresh"``), as the threaded
driver's background jobs are (docs/strategies.md, "How every origin call stays counted").
Without a recorder the load is still made through the loader (and counted there).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Protocol

from strategies.base import Outcome, Probe, Servers


class AsyncLoader(Protocol):
    """Computes a key's value from the origin and records the cost in ``probe``."""

    async def load(self, key: str, probe: Probe) -> bytes: ...


class Refreshes(Protocol):
    """Receives the loads a library ran off the request path, one row each."""

    def record(self, key: str, probe: Probe) -> None: ...


@dataclass(frozen=True)
class AsyncDeps:
    """What every async strategy is built with. ``servers.threads`` is the number of coroutines
    that share the strategy (its client's pool is sized for them, one connection each plus
    four, as the sync adapters' are)."""

    servers: Servers
    loader: AsyncLoader
    ttl_ms: int
    refreshes: Refreshes | None = None


class AsyncStrategy(Protocol):
    """A stampede defence run in an event loop."""

    name: ClassVar[str]

    async def fetch(self, key: str, probe: Probe) -> Outcome: ...

    async def prime(self, key: str, value: bytes, expire_at_ms: int) -> None: ...

    async def on_write(self, key: str, probe: Probe) -> None: ...

    async def cached_version(self, key: str) -> int | None: ...

    async def aclose(self) -> None: ...


POOL_SLACK = 4  # connections beyond one per coroutine, as the sync adapters' pools
TIMEOUT_S = 2.0  # our socket and connect timeouts (the libraries' own: 1 s, 5 s, or none)


def pool_size(deps: AsyncDeps) -> int:
    return deps.servers.threads + POOL_SLACK
