"""meta-memcache 4 on memcached >= 1.6: the server's own leases, through the meta protocol.

The recipe is the library's ``get_or_lease`` with a CAS write-back: a meta get with ``N``
(vivify on miss) hands exactly one client the win flag ``W`` and leaves a 0-byte stub; the
others see ``Z`` and retry by the ``LeasePolicy`` (defaults: 3 tries, 1.0 s then x1.2, "the
others are BLOCKED"); a client whose retries run out gets a miss and computes too. The winner
writes with the CAS token it was given, so a write made stale by a delete in between is refused
(Facebook's lease promise). With ``recache_ttl`` (a ``RecachePolicy``; off by default) one
reader wins a refresh while less than that many seconds are left, the others keep the value.

Outcomes come from the server's flags (``_get_or_lease``, the library's hook for wrappers that
read them): a value after a wait is ``waited`` (the waits timed in ``lock_wait_ns``), a win or a
lost lease whose retries ran out computes (``filled``; the first waited, the second not), a
recache win is a refresh of the live value, named by its expiry (now + the TTL the server
reported, in its whole seconds). memcached keeps TTLs in whole seconds and its clock ticks once
a second, so a value lives between TTL - 1 and TTL seconds.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, ClassVar

from meta_memcache.cache_client import CacheClient
from meta_memcache.configuration import (
    LeasePolicy,
    RecachePolicy,
    ServerAddress,
    connection_pool_factory_builder,
)
from meta_memcache.protocol import Key
from meta_memcache_socket import Value

from adapters.recipe import own_expiry, servers_of
from model.memcache import memcache_address
from model.services import connection_bound
from strategies import version
from strategies.base import HIT, CacheServer, Deps, Outcome, Probe
from strategies.params import OnWrite, WriteParams


@dataclass(frozen=True)
class MetaMemcacheParams(WriteParams):
    lease_ttl: int = 30  # seconds the stub (the lease) lives if its winner never writes
    miss_retries: int = 3
    miss_retry_wait: float = 1.0  # seconds before the first retry
    wait_backoff_factor: float = 1.2
    miss_max_retry_wait: float = 5.0
    recache_ttl: int = 0  # win a refresh while fewer seconds are left; 0: no RecachePolicy

    def __post_init__(self) -> None:
        if self.lease_ttl <= 0 or self.miss_retries <= 0:
            raise ValueError("lease_ttl and miss_retries must be > 0")
        if self.miss_retry_wait < 0 or self.miss_max_retry_wait < 0:
            raise ValueError("miss_retry_wait and miss_max_retry_wait must be >= 0")
        if self.wait_backoff_factor < 1 or self.recache_ttl < 0:
            raise ValueError("wait_backoff_factor must be >= 1 and recache_ttl >= 0")

    def lease_policy(self) -> LeasePolicy:
        return LeasePolicy(self.lease_ttl, self.miss_retries, self.miss_retry_wait,
                           self.wait_backoff_factor, self.miss_max_retry_wait)


def ttl_seconds(ttl_ms: int) -> int:
    """memcached's TTL for ``ttl_ms``: whole seconds only."""
    if ttl_ms % 1000 or ttl_ms < 1000:
        raise ValueError(f"memcached keeps TTLs in whole seconds; {ttl_ms / 1000:g} s is not one")
    return ttl_ms // 1000


class MetaMemcache:
    name: ClassVar[str] = "meta-memcache"
    Params = MetaMemcacheParams
    cache_server: ClassVar[CacheServer] = CacheServer.MEMCACHED

    def __init__(self, deps: Deps, params: MetaMemcacheParams) -> None:
        servers = servers_of(deps, self.name)
        host, port = memcache_address(servers.cache_url)
        size = connection_bound(servers.threads)  # the docs: raise it when connections churn
        client = CacheClient.cache_client_from_servers(
            [ServerAddress(host, port)],
            connection_pool_factory_builder(initial_pool_size=1, max_pool_size=size))
        assert isinstance(client, CacheClient)  # its factory's return type is the Protocol
        self.client = client
        self._deps = deps
        self._ttl_s = ttl_seconds(deps.ttl_ms)
        self._lease = params.lease_policy()
        self._recache = RecachePolicy(params.recache_ttl) if params.recache_ttl else None
        self._update = params.on_write is OnWrite.UPDATE

    def fetch(self, key: str, probe: Probe) -> Outcome:
        waited: list[float] = []

        def wait(seconds: float) -> None:
            waited.append(seconds)
            time.sleep(seconds)

        started = time.perf_counter_ns()
        result = self.client._get_or_lease(Key(key), self._lease, recache_policy=self._recache,
                                           lease_wait_fn=wait)
        if waited:
            probe.lock_wait_ns = time.perf_counter_ns() - started
        if result is not None and result.value is not None:
            version.served(probe, result.value)
            return Outcome.WAITED if waited else HIT
        self._fill(key, probe, result)
        return Outcome.FILLED

    def _fill(self, key: str, probe: Probe, lease: Value | None) -> None:
        """Compute, then write back with the lease's CAS token (refused if a delete came in
        between); a recache win names the refresh cycle of the value it replaces."""
        if lease is not None and lease.flags.win and lease.size > 0 and lease.flags.ttl is not None:
            probe.refresh_of_ns = time.time_ns() + max(0, lease.flags.ttl) * 1_000_000_000
        value = self._deps.loader.load(key, probe)
        version.served(probe, value)
        cas = lease.flags.cas_token if lease is not None else None
        sent = time.time_ns()
        if self.client.set(Key(key), value, ttl=self._ttl_s, cas_token=cas):
            version.stored(probe, value, sent)

    def prime(self, key: str, value: bytes, expire_at_ms: int) -> None:
        """Stored to expire at that instant (an absolute expiry, in memcached's whole seconds).

        memcached drops an item of absolute expiry E at its first clock tick at or after E, and
        its ticks lag the wall clock's seconds by a phase of its own in [0, 1) (measured 0.06-0.68
        s over five processes): so the second below, and the expiry comes within a second either
        side of the instant. Rounded to the nearest second it came up to 1.5 s late, past the one
        TTL period of a short trial's window (issue 31: meta-memcache with 0 events)."""
        self.client.set(Key(key), value, ttl=expire_at_ms // 1000)

    def on_write(self, key: str, probe: Probe) -> None:
        """The library's ``delete`` (a lease held meanwhile then fails its CAS write), or a
        plain ``set`` of the new value."""
        if not self._update:
            self.client.delete(Key(key))
            return
        value = self._deps.loader.load(key, probe)
        sent = time.time_ns()
        if self.client.set(Key(key), value, ttl=self._ttl_s):
            version.stored(probe, value, sent)

    def cached_version(self, key: str) -> int | None:
        value: Any = self.client.get(Key(key))
        return None if not value else version.version_of(value)

    def close(self) -> None:
        """The client keeps no thread and has no close: its sockets close when it is collected."""

    @staticmethod
    def check_run(ttl_ms: int, aligned: bool) -> None:
        ttl_seconds(ttl_ms)
        own_expiry("meta-memcache", aligned)
