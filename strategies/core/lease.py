"""lease as logic: memcache-style leases (Nishtala et al., NSDI 2013) emulated on Redis with Lua.

On a miss only one client per key per lease interval gets a token; the others wait and retry,
or get the stale copy when there is one. A set is accepted only with the token that still owns
the lease, and an invalidation deletes the lease, so a set computed before it is rejected (no
stale set). Leases live on the cache server itself (they must be atomic with the value), so
there is no lock store to fail: a failing cache is an error, and the wake list is the cache's.

A request is ``steps``: one script call, then ``answer`` (plain: a value or a stale copy) or
``rest`` (a generator: fill under the granted lease, or wait and ask again). The threaded driver
sends the first script call itself, so a hit starts no generator.
"""

from __future__ import annotations

import os
from collections.abc import Generator
from typing import Any

from strategies import envelope, version
from strategies.base import HIT, Clock, LockWaitTimeout, Outcome, Probe
from strategies.core.effects import CACHE, Eval, Load
from strategies.core.flight import Waiting
from strategies.params import Ttl, WaitParams

# KEYS: value, lease, stale. ARGV: token, lease_ms. Returns {0, value} | {1} lease granted |
# {2, stale envelope} | {3} wait and retry.
GET_OR_LEASE = """
local v = redis.call('get', KEYS[1])
if v then return {0, v} end
if redis.call('set', KEYS[2], ARGV[1], 'NX', 'PX', ARGV[2]) then return {1} end
local s = redis.call('get', KEYS[3])
if s then return {2, s} end
return {3}
"""
# KEYS: value, lease, stale. ARGV: token, value, ttl_ms, stale_ms, stale envelope.
SET_WITH_LEASE = """
if redis.call('get', KEYS[2]) ~= ARGV[1] then return 0 end
redis.call('set', KEYS[1], ARGV[2], 'PX', ARGV[3])
if tonumber(ARGV[4]) > 0 then
    redis.call('set', KEYS[3], ARGV[5], 'PX', tonumber(ARGV[3]) + tonumber(ARGV[4]))
end
redis.call('del', KEYS[2])
return 1
"""
INVALIDATE = "return redis.call('del', KEYS[1], KEYS[2])"


def lease_keys(key: str) -> tuple[str, str, str]:
    return key, f"lease:{key}", f"stale:{key}"


def new_token() -> bytes:
    return os.urandom(8).hex().encode()


class LeaseCore:
    def __init__(self, ttl: Ttl, clock: Clock, params: WaitParams, lease_ms: int,
                 stale_ms: int) -> None:
        self.ttl = ttl
        self.clock = clock
        self.lease_ms = lease_ms
        self.stale_ms = stale_ms
        self.waiting = Waiting(clock, params, lease_ms, store=CACHE)
        self._max_wait_ms = params.max_wait_ms

    def steps(self, key: str, probe: Probe) -> Generator[Any, Any, Outcome]:
        """A whole request as one generator."""
        started = self.clock.now_ns()
        token = new_token()
        reply = yield Eval(CACHE, GET_OR_LEASE, lease_keys(key), (token, self.lease_ms))
        outcome = self.answer(reply, 0, started, probe)
        if outcome is None:
            outcome = yield from self.rest(key, token, reply, started, probe)
        return outcome

    def answer(self, reply: Any, attempt: int, started_ns: int, probe: Probe) -> Outcome | None:
        """The answer of one ``GET_OR_LEASE`` reply when it carries a value or a stale copy;
        None when this request holds the lease or must wait."""
        if reply[0] == 0:
            probe.lock_wait_ns = self.clock.now_ns() - started_ns if attempt else 0
            version.served(probe, reply[1])
            return Outcome.WAITED if attempt else HIT
        if reply[0] == 2:
            stale = envelope.unpack(reply[1])
            # past its expiry; a copy served because a write removed the value before its
            # expiry has age 0 here (how far behind it is shows in its version)
            probe.stale_age_ns = max(0, -stale.left_us(self.clock.wall_ns() // 1000) * 1000)
            version.served(probe, stale.payload)
            return Outcome.STALE
        return None

    def rest(self, key: str, token: bytes, reply: Any, started_ns: int, probe: Probe,
             ) -> Generator[Any, Any, Outcome]:
        """Fill under the lease this request was granted, or wait and ask again, bounded."""
        deadline = started_ns + self.waiting.max_wait_ns
        attempt = 0
        while True:
            if reply[0] == 1:
                probe.lock_wait_ns = self.clock.now_ns() - started_ns
                yield from self.fill(key, token, probe)
                return Outcome.FILLED
            if self.clock.now_ns() >= deadline:
                raise LockWaitTimeout(f"no value or lease for {key!r} after "
                                      f"{self._max_wait_ms} ms")
            yield from self.waiting.pause(key, deadline)
            attempt += 1
            token = new_token()
            reply = yield Eval(CACHE, GET_OR_LEASE, lease_keys(key), (token, self.lease_ms))
            outcome = self.answer(reply, attempt, started_ns, probe)
            if outcome is not None:
                return outcome

    def fill(self, key: str, token: bytes, probe: Probe) -> Generator[Any, Any, None]:
        """A rejected set (lease cancelled meanwhile) still answers this request with the value
        it computed; it just is not cached."""
        value = yield Load(key)
        version.served(probe, value)
        if (yield from self.set_with_lease(key, token, value, probe)):
            yield from self.waiting.wake(key)

    def set_with_lease(self, key: str, token: bytes, value: bytes, probe: Probe | None,
                       ) -> Generator[Any, Any, bool]:
        """Store ``value`` if ``token`` still owns the lease; False when it was cancelled."""
        sent = self.clock.wall_ns()
        ttl_ms = self.ttl.draw_ms(sent // 1_000_000)
        stale = envelope.pack(value, sent // 1000 + ttl_ms * 1000)
        accepted = bool((yield Eval(CACHE, SET_WITH_LEASE, lease_keys(key),
                                    (token, value, ttl_ms, self.stale_ms, stale))))
        if accepted and probe is not None:
            version.stored(probe, value, sent)
        return accepted
