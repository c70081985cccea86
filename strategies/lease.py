"""Memcache-style leases (Nishtala et al., NSDI 2013) emulated on Redis with Lua scripts.

On a miss only one client per key per lease interval gets a token; the others wait and retry,
or get the stale copy when there is one. A set is accepted only with the token that still owns
the lease, and an invalidation deletes the lease, so a set computed before it is rejected
(no stale set). Leases live on the cache server itself (they must be atomic with the value),
so there is no separate lock store to fail: a failing cache is an error.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from typing import ClassVar

from strategies import envelope, version
from strategies.base import Deps, LockWaitTimeout, Outcome, Probe
from strategies.commands import Arg, Command, set_command
from strategies.params import OnWrite, Ttl, WaitParams
from strategies.registry import register
from strategies.waiting import Waiter

# KEYS: value, lease, stale. ARGV: token, lease_ms. Returns {0, value} | {1} lease granted |
# {2, stale envelope} | {3} wait and retry.
_GET_OR_LEASE = """
local v = redis.call('get', KEYS[1])
if v then return {0, v} end
if redis.call('set', KEYS[2], ARGV[1], 'NX', 'PX', ARGV[2]) then return {1} end
local s = redis.call('get', KEYS[3])
if s then return {2, s} end
return {3}
"""
# KEYS: value, lease, stale. ARGV: token, value, ttl_ms, stale_ms, stale envelope.
_SET_WITH_LEASE = """
if redis.call('get', KEYS[2]) ~= ARGV[1] then return 0 end
redis.call('set', KEYS[1], ARGV[2], 'PX', ARGV[3])
if tonumber(ARGV[4]) > 0 then
    redis.call('set', KEYS[3], ARGV[5], 'PX', tonumber(ARGV[3]) + tonumber(ARGV[4]))
end
redis.call('del', KEYS[2])
return 1
"""
_INVALIDATE = "return redis.call('del', KEYS[1], KEYS[2])"


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
    return [key, f"lease:{key}", f"stale:{key}"]


@register
class Lease:
    name: ClassVar[str] = "lease"
    Params = LeaseParams

    def __init__(self, deps: Deps, params: LeaseParams) -> None:
        self._deps = deps
        self._params = params
        self._ttl = Ttl(deps.ttl_ms, params.jitter, deps.expiry_grid)
        self._waiter = Waiter(deps.cache, params, params.lease_ms, contextlib.nullcontext)
        self._get = deps.cache.script(_GET_OR_LEASE)
        self._set = deps.cache.script(_SET_WITH_LEASE)
        self._invalidate = deps.cache.script(_INVALIDATE)

    def fetch(self, key: str, probe: Probe) -> Outcome:
        started = time.perf_counter_ns()
        deadline = self._waiter.deadline_ns(started)
        for attempt in range(1_000_000):
            token = os.urandom(8).hex().encode()
            reply = self._get(_keys(key), [token, self._params.lease_ms])
            if reply[0] == 0:
                probe.lock_wait_ns = time.perf_counter_ns() - started if attempt else 0
                version.served(probe, reply[1])
                return Outcome.WAITED if attempt else Outcome.HIT
            if reply[0] == 1:
                probe.lock_wait_ns = time.perf_counter_ns() - started
                self._fill(key, token, probe)
                return Outcome.FILLED
            if reply[0] == 2:
                stale = envelope.unpack(reply[1])
                # past its expiry; a copy served because a write removed the value before its
                # expiry has age 0 here (how far behind it is shows in its version)
                probe.stale_age_ns = max(0, -stale.left_us(envelope.now_us()) * 1000)
                version.served(probe, stale.payload)
                return Outcome.STALE
            if time.perf_counter_ns() >= deadline:
                break
            self._waiter.pause(key, deadline)
        raise LockWaitTimeout(f"no value or lease for {key!r} after {self._params.max_wait_ms} ms")

    def set_with_lease(self, key: str, token: bytes, value: bytes, probe: Probe | None = None,
                       ) -> bool:
        """Store ``value`` if ``token`` still owns the lease; False when it was cancelled."""
        ttl_ms = self._ttl.draw_ms()
        stale = envelope.pack(value, envelope.now_us() + ttl_ms * 1000)
        args: list[Arg] = [token, value, ttl_ms, self._params.stale_ms, stale]
        sent = time.time_ns()
        accepted = bool(self._set(_keys(key), args))
        if accepted and probe is not None:
            version.stored(probe, value, sent)
        return accepted

    def lease(self, key: str) -> bytes | None:
        """Ask for a lease on a missing key: the token, or None (value present or leased)."""
        token = os.urandom(8).hex().encode()
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

    def _fill(self, key: str, token: bytes, probe: Probe) -> None:
        """A rejected set (lease cancelled meanwhile) still answers this request with the value
        it computed; it just is not cached."""
        value = self._deps.loader.load(key, probe)
        version.served(probe, value)
        if self.set_with_lease(key, token, value, probe):
            self._waiter.wake(key)

    def prime(self, key: str, value: bytes, expire_at_ms: int) -> None:
        commands: list[Command] = [("DEL", f"lease:{key}"), set_command(key, value, pxat=expire_at_ms)]
        if self._params.stale_ms:
            commands.append(set_command(f"stale:{key}", envelope.pack(value, expire_at_ms * 1000),
                                        pxat=expire_at_ms + self._params.stale_ms))
        self._deps.cache.pipeline(*commands, transaction=True)
