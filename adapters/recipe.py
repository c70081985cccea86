"""What the library adapters share: their clients, and the check-lock-check recipe of the locks.

python-redis-lock documents its cache recipe (README, "Avoid dogpile effect in django"): read;
on a miss take the lock, read again, and only then compute and set. redis-py documents its lock
but no cache recipe, so its adapter runs the same one: the two differ only in the lock, which is
what a user choosing between them wants to know. Each library's own client is a ``redis.Redis``
over a pool sized for the worker's threads with the same 2 s timeouts as ours (redis-py's
default is no timeout at all, which would let a lost wake-up hang a client for good); a wait
longer than that becomes a ``TimeoutError`` error row.
"""

from __future__ import annotations

import dataclasses
import time
from contextlib import AbstractContextManager
from typing import ClassVar

from model.services import redis_client
from strategies import version
from strategies.base import HIT, Deps, Outcome, Probe, Servers
from strategies.commands import PlainCommands
from strategies.params import Ttl, WriteParams


def servers_of(deps: Deps, name: str) -> Servers:
    """The server URLs a library strategy builds its own clients from."""
    if deps.servers is None:
        raise ValueError(f"{name} brings its own clients: it needs Deps.servers (the URLs)")
    return deps.servers


def seconds_or_none(value: float) -> float | None:
    """A library timeout given as a number: -1 stands for None, the libraries' "never"."""
    return None if value == -1 else value


def own_expiry(name: str, aligned: bool) -> None:
    """A library that sets its values' expiry itself cannot follow ``--expiry aligned``."""
    if aligned:
        raise ValueError(f"--expiry aligned: {name} sets its values' expiry itself "
                         "(each lives one TTL after its fill); run it with --expiry drift")


def check_timeout(name: str, value: float) -> None:
    if value != -1 and not value > 0:
        raise ValueError(f"{name} must be > 0, or -1 for none (the library's default)")


class LockRecipe(version.CacheAside):
    """Read; on a miss, under the library's lock, read again, else fill (the plain fill)."""

    name: ClassVar[str]

    def __init__(self, deps: Deps, params: WriteParams) -> None:
        servers = servers_of(deps, self.name)
        self.cache_client = redis_client(servers.cache_url, servers.threads)
        self.lock_client = redis_client(servers.lock_url, servers.threads)
        self._deps = dataclasses.replace(deps, cache=PlainCommands(self.cache_client),
                                         locks=PlainCommands(self.lock_client))
        self._ttl = Ttl(deps.ttl_ms, 0.0, deps.expiry_grid)
        self._on_write_from(params)

    def locked(self, key: str) -> AbstractContextManager[object]:
        """The library's lock for ``key``, as a context manager (acquire blocks)."""
        raise NotImplementedError

    def fetch(self, key: str, probe: Probe) -> Outcome:
        raw = self._deps.cache.get(key)
        if raw is not None:
            version.served(probe, raw)
            return HIT
        started = time.perf_counter_ns()
        with self.locked(key):
            probe.lock_wait_ns = time.perf_counter_ns() - started
            raw = self._deps.cache.get(key)
            if raw is not None:  # filled while this client waited for the lock
                version.served(probe, raw)
                return Outcome.WAITED
            self._fill(key, probe)
            return Outcome.FILLED

    def prime(self, key: str, value: bytes, expire_at_ms: int) -> None:
        """Under the library's lock, as every locking strategy primes (experiment 000)."""
        with self.locked(key):
            self._deps.cache.set(key, value, pxat=expire_at_ms)

    def close(self) -> None:
        self.cache_client.close()
        self.lock_client.close()

