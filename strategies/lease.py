"""Memcache-style leases (Nishtala et al., NSDI 2013) emulated on Redis with Lua scripts.

On a miss only one client per key per lease interval gets a token; the others wait and retry,
or get the stale copy when there is one. A set is accepted only with the token that still owns
the lease, and an invalidation deletes the lease, so a set computed before it is rejected
(no stale set). Leases live on the cache server itself (they must be atomic with the value),
so there is no separate lock store to fail: a failing cache is an error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from strategies import envelope, version
from strategies.base import Deps, Outcome, Probe
from strategies.commands import Command, set_command
from strategies.core.lease import (
    GET_OR_LEASE,
    INVALIDATE,
    SET_WITH_LEASE,
    LeaseCore,
    lease_keys,
    new_token,
)
from strategies.drivers.sync import SyncDriver, clock_of
from strategies.params import OnWrite, Ttl, WaitParams
from strategies.registry import register

__all__ = ["GET_OR_LEASE", "SET_WITH_LEASE", "Lease", "LeaseParams"]


@dataclass(frozen=True)
class LeaseParams(WaitParams):
    lease_ms: int = 1000  # a holder that dies frees the key after this
    stale_ms: int = 1000  # how long after expiry a stale copy may be served (0: never)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.lease_ms <= 0:
            raise ValueError("lease_ms must be > 0")
        if self.stale_ms < 0:
            raise ValueError("stale_ms must be >= 0")
        if self.on_write is OnWrite.UPDATE:
            raise ValueError("on_write=update does not apply: a lease write invalidates (delete)")


def _keys(key: str) -> list[str]:
    return list(lease_keys(key))


@register
class Lease:
    """Its logic: ``strategies.core.lease``, run by the threaded driver; ``fetch`` sends the
    first script call itself and starts the core's generator only when that did not answer."""

    name: ClassVar[str] = "lease"
    Params = LeaseParams
    sans_io: ClassVar[bool] = True  # the asyncio driver runs its core's steps

    def __init__(self, deps: Deps, params: LeaseParams) -> None:
        self._deps = deps
        self._params = params
        self._ttl = Ttl(deps.ttl_ms, params.jitter, deps.expiry_grid)
        self.core = LeaseCore(self._ttl, clock_of(deps), params, params.lease_ms, params.stale_ms)
        self.driver = SyncDriver(deps)
        self._get = deps.cache.script(GET_OR_LEASE)
        self._invalidate = deps.cache.script(INVALIDATE)

    def fetch(self, key: str, probe: Probe) -> Outcome:
        started = self.core.clock.now_ns()
        token = new_token()
        reply = self._get(_keys(key), [token, self._params.lease_ms])
        outcome = self.core.answer(reply, 0, started, probe)
        if outcome is None:
            outcome = self.driver.run(self.core.rest(key, token, reply, started, probe), probe)
        return outcome

    def set_with_lease(self, key: str, token: bytes, value: bytes, probe: Probe | None = None,
                       ) -> bool:
        """Store ``value`` if ``token`` still owns the lease; False when it was cancelled."""
        accepted: bool = self.driver.run(self.core.set_with_lease(key, token, value, probe),
                                         probe or Probe())
        return accepted

    def lease(self, key: str) -> bytes | None:
        """Ask for a lease on a missing key: the token, or None (value present or leased)."""
        token = new_token()
        reply = self._get(_keys(key), [token, self._params.lease_ms])
        return token if reply[0] == 1 else None

    def invalidate(self, key: str) -> None:
        """The source changed: drop the value and cancel any outstanding lease."""
        self._invalidate(_keys(key), [])

    def on_write(self, key: str, probe: Probe) -> None:
        """Memcache's delete: the value and any outstanding lease go, so a set computed from the
        old row is refused (the stale copy stays, served as ``stale`` with its version)."""
        self.invalidate(key)

    def cached_version(self, key: str) -> int | None:
        return version.cached_version(self._deps.cache, key)

    def prime(self, key: str, value: bytes, expire_at_ms: int) -> None:
        commands: list[Command] = [("DEL", f"lease:{key}"), set_command(key, value, pxat=expire_at_ms)]
        if self._params.stale_ms:
            commands.append(set_command(f"stale:{key}", envelope.pack(value, expire_at_ms * 1000),
                                        pxat=expire_at_ms + self._params.stale_ms))
        self._deps.cache.pipeline(*commands, transaction=True)
