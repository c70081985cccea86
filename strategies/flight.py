"""Fill-or-wait under the distributed lock: the part every lock-based strategy shares.

One client per key takes the lock and fills; the others wait (poll or notify, bounded) and
re-read. With ``double_check`` the lock holder reads the cache again first (lock-dc), so a
client that read a miss just before the value came back does not fill it a second time.
A failing lock store is handled by the ``on_lock_error`` policy, here and nowhere else.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from strategies.base import Deps, LockStoreDown, LockWaitTimeout, Outcome, Probe
from strategies.locking import OwnedLock, lock_key
from strategies.params import LockErrorPolicy, LockParams
from strategies.waiting import Waiter

Present = Callable[[], bool]  # is a usable value in the cache now?
Fill = Callable[[Probe], None]  # load from the origin and write the value


class SingleFlight:
    """Distributed single flight for one strategy instance."""

    def __init__(self, deps: Deps, params: LockParams, double_check: bool) -> None:
        self.lock = OwnedLock(deps.locks, params.lock_ttl_ms)
        self.waiter = Waiter(deps.locks, params, params.lock_ttl_ms)
        self._double_check = double_check
        self._open = params.on_lock_error is LockErrorPolicy.OPEN
        self._max_wait_ms = params.max_wait_ms

    def run(self, key: str, probe: Probe, present: Present, fill: Fill) -> Outcome:
        """Fill under the lock or wait for the filler; apply the lock-store policy."""
        try:
            return self._fill_or_wait(key, probe, present, fill)
        except LockStoreDown:
            if not self._open:
                raise
            fill(probe)  # fail open: this client goes to the origin without the lock
            return Outcome.FILLED

    def _fill_or_wait(self, key: str, probe: Probe, present: Present, fill: Fill) -> Outcome:
        name = lock_key(key)
        started = time.perf_counter_ns()
        deadline = self.waiter.deadline_ns(started)
        while True:
            token = self.lock.try_acquire(name)
            if token is not None:
                probe.lock_wait_ns = time.perf_counter_ns() - started
                return self.fill_locked(key, token, probe, present, fill)
            self.waiter.pause(key, deadline)
            if present():
                probe.lock_wait_ns = time.perf_counter_ns() - started
                return Outcome.WAITED
            if time.perf_counter_ns() >= deadline:
                raise LockWaitTimeout(f"no value for {key!r} after {self._max_wait_ms} ms")

    def fill_locked(self, key: str, token: bytes, probe: Probe, present: Present,
                    fill: Fill) -> Outcome:
        """Holding the lock: (re-check,) fill, wake the waiters, release."""
        filled = False
        try:
            self.waiter.reset(key)
            if self._double_check and present():
                return Outcome.WAITED
            fill(probe)
            filled = True
            return Outcome.FILLED
        finally:
            self._after(key, token, filled)

    def _after(self, key: str, token: bytes, filled: bool) -> None:
        """Wake the waiters and release. The value is written already, so a lock store failing
        now is the policy's call: under ``open`` the lock simply expires by its TTL."""
        try:
            if filled:
                self.waiter.wake(key)
            self.lock.release(lock_key(key), token)
        except LockStoreDown:
            if not self._open:
                raise
