"""Fill-or-wait under the distributed lock, as steps: the part every lock-based strategy shares.

One client per key takes the lock (``SET NX PX`` with an owner token) and fills; the others wait
(poll, or notify through a per-key wake list) and re-read, bounded by ``max_wait_ms``. With
``double_check`` the holder reads the cache again first (lock-dc), so a client that read a miss
just before the value came back does not fill it a second time. A failing lock store becomes
``LockStoreDown`` here, and the ``on_lock_error`` policy is applied here and nowhere else.

Notify uses a wake list rather than pub/sub: the filler pushes a token after it writes, a waiter
blocks in BLPOP and pushes the token back so the next waiter wakes too; a push made before a
waiter blocks stays in the list, so no wake-up is lost.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Generator
from typing import Any

import redis

from strategies.base import Clock, LockStoreDown, LockWaitTimeout, Outcome, Probe
from strategies.core.effects import LOCKS, Blpop, Delete, Eval, Pipeline, Rpush, Set, Sleep
from strategies.params import LockErrorPolicy, LockParams, WaitParams, Wake

FAILED_OPEN = b""  # acquire_or_open's answer: the lock store failed, the policy is open

# Compare-and-delete in one server-side step, so a holder whose lock already expired cannot
# delete the lock that another client took after it.
RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then
    return redis.call('del', KEYS[1])
end
return 0
"""
TOKEN = b"1"
MAX_BLOCK_S = 1.0  # one BLPOP stays well under the clients' 2 s socket timeout

Present = Callable[[], Generator[Any, Any, bool]]  # is a usable value in the cache now?
Fill = Callable[[Probe], Generator[Any, Any, None]]  # load from the origin and write the value


def lock_key(key: str) -> str:
    return f"lock:{key}"


def wake_key(key: str) -> str:
    return f"wake:{key}"


def new_token() -> bytes:
    return os.urandom(8).hex().encode()


def guarded(effect: Any, lock_store: bool) -> Generator[Any, Any, Any]:
    """``effect``'s result; on the lock store, its failure raised as ``LockStoreDown``."""
    if not lock_store:
        return (yield effect)
    try:
        return (yield effect)
    except redis.RedisError as exc:
        raise LockStoreDown(f"{type(exc).__name__}: {exc}") from exc


class Waiting:
    """One pause between two looks at the cache, by the wake mode of ``params``; its wake list
    lives on ``store`` (the lock store; lease keeps it on the cache, whose failures stay cache
    errors)."""

    def __init__(self, clock: Clock, params: WaitParams, token_ttl_ms: int,
                 store: int = LOCKS) -> None:
        self._clock = clock
        self._store = store
        self._lock_store = store == LOCKS
        self._notify = params.wake is Wake.NOTIFY
        self._poll_s = params.poll_ms / 1000
        self.max_wait_ns = int(params.max_wait_ms * 1e6)
        self._token_ttl_ms = token_ttl_ms

    def pause(self, key: str, deadline_ns: int) -> Generator[Any, Any, None]:
        """Sleep ``poll_ms`` or block until woken; never past ``deadline_ns``."""
        remaining_s = (deadline_ns - self._clock.now_ns()) / 1e9
        if not self._notify:
            yield Sleep(max(0.0, min(self._poll_s, remaining_s)))
            return
        if remaining_s <= 0.001:
            return  # BLPOP with timeout 0 would block forever
        name = wake_key(key)
        popped = yield from guarded(Blpop(self._store, name, min(remaining_s, MAX_BLOCK_S)),
                                    self._lock_store)
        if popped is not None:
            yield from guarded(Rpush(self._store, name, TOKEN), self._lock_store)

    def reset(self, key: str) -> Generator[Any, Any, None]:
        """A new fill begins: drop the previous fill's token (notify only)."""
        if self._notify:
            yield from guarded(Delete(self._store, (wake_key(key),)), self._lock_store)

    def wake(self, key: str) -> Generator[Any, Any, None]:
        """The value is written: wake every waiter (notify only); the token expires by itself."""
        if self._notify:
            name = wake_key(key)
            yield from guarded(Pipeline(self._store, (("RPUSH", name, TOKEN),
                                                      ("PEXPIRE", name, self._token_ttl_ms))),
                               self._lock_store)


class Flight:
    """Distributed single flight for one strategy instance."""

    def __init__(self, clock: Clock, params: LockParams, double_check: bool) -> None:
        self._clock = clock
        self._lock_ttl_ms = params.lock_ttl_ms
        self.waiting = Waiting(clock, params, params.lock_ttl_ms)
        self.double_check = double_check
        self.open = params.on_lock_error is LockErrorPolicy.OPEN
        self._max_wait_ms = params.max_wait_ms

    def acquire(self, key: str) -> Generator[Any, Any, bytes | None]:
        """The owner token if this request took ``key``'s lock, else None."""
        token = new_token()
        taken = yield from guarded(Set(LOCKS, lock_key(key), token, px=self._lock_ttl_ms,
                                       nx=True), True)
        return token if taken else None

    def acquire_or_open(self, key: str) -> Generator[Any, Any, bytes | None]:
        """``acquire`` under the lock-store policy: a failure of the lock store raises when the
        policy is closed and answers ``FAILED_OPEN`` when it is open (the caller goes on
        without the lock, its own way)."""
        try:
            return (yield from self.acquire(key))
        except LockStoreDown:
            if not self.open:
                raise
            return FAILED_OPEN

    def release(self, key: str, token: bytes) -> Generator[Any, Any, bool]:
        """Delete the lock if ``token`` still owns it; False when it had expired or moved on."""
        return bool((yield from guarded(Eval(LOCKS, RELEASE, (lock_key(key),), (token,)), True)))

    def run(self, key: str, probe: Probe, present: Present, fill: Fill,
            ) -> Generator[Any, Any, Outcome]:
        """Fill under the lock or wait for the filler; apply the lock-store policy."""
        try:
            return (yield from self._fill_or_wait(key, probe, present, fill))
        except LockStoreDown:
            if not self.open:
                raise
            yield from fill(probe)  # fail open: this client goes to the origin without the lock
            return Outcome.FILLED

    def _fill_or_wait(self, key: str, probe: Probe, present: Present, fill: Fill,
                      ) -> Generator[Any, Any, Outcome]:
        now = self._clock.now_ns
        started = now()
        deadline = started + self.waiting.max_wait_ns
        while True:
            token = yield from self.acquire(key)
            if token is not None:
                probe.lock_wait_ns = now() - started
                return (yield from self.fill_locked(key, token, probe, present, fill))
            yield from self.waiting.pause(key, deadline)
            if (yield from present()):
                probe.lock_wait_ns = now() - started
                return Outcome.WAITED
            if now() >= deadline:
                raise LockWaitTimeout(f"no value for {key!r} after {self._max_wait_ms} ms")

    def fill_locked(self, key: str, token: bytes, probe: Probe, present: Present, fill: Fill,
                    ) -> Generator[Any, Any, Outcome]:
        """Holding the lock: (re-check,) fill, wake the waiters, release."""
        filled = False
        try:
            yield from self.waiting.reset(key)
            if self.double_check and (yield from present()):
                return Outcome.WAITED
            yield from fill(probe)
            filled = True
            return Outcome.FILLED
        finally:
            yield from self._after(key, token, filled)

    def _after(self, key: str, token: bytes, filled: bool) -> Generator[Any, Any, None]:
        """Wake the waiters and release. The value is written already, so a lock store failing
        now is the policy's call: under ``open`` the lock simply expires by its TTL."""
        try:
            if filled:
                yield from self.waiting.wake(key)
            yield from self.release(key, token)
        except LockStoreDown:
            if not self.open:
                raise
