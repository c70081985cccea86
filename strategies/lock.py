"""Lock-based single flight: the client that takes the lock fills, the others wait and re-read.

``lock`` is the variant experiment 000 measured: a client that read a miss and wins the lock
after the value is back computes it again. ``lock-dc`` reads the cache once more after taking
the lock (double-checked locking), which closes that gap. The logic is
``strategies.core.cacheaside.LockCore`` (and ``core.flight``); this class runs it on the
threaded driver.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from strategies import version
from strategies.base import Deps, Outcome, Probe
from strategies.core.cacheaside import LockCore
from strategies.drivers.sync import Driven, SyncDriver, clock_of
from strategies.locking import OwnedLock, lock_key
from strategies.params import LockParams, Ttl
from strategies.registry import register


def prime_under_lock(lock: OwnedLock, key: str, write: Callable[[], None]) -> None:
    """Prime under the same lock the clients use, as experiment 000 did."""
    token = lock.try_acquire(lock_key(key))
    if token is None:
        raise RuntimeError(f"cannot prime {key!r}: its lock is held")
    try:
        write()
    finally:
        lock.release(lock_key(key), token)


@register
class Lock(Driven, version.CacheAside):
    name: ClassVar[str] = "lock"
    Params = LockParams
    double_check: ClassVar[bool] = False
    core: LockCore

    def __init__(self, deps: Deps, params: LockParams) -> None:
        self._deps = deps
        self._ttl = Ttl(deps.ttl_ms, params.jitter, deps.expiry_grid)
        self.core = LockCore(self._ttl, clock_of(deps), params, self.double_check)
        self.driver = SyncDriver(deps)
        self.lock = OwnedLock(deps.locks, params.lock_ttl_ms)  # priming's (set-up, not a request)
        self._on_write_from(params)

    def miss(self, key: str, raw: bytes | None, probe: Probe) -> Outcome:
        return self.fill_or_wait(key, probe)

    def fill_or_wait(self, key: str, probe: Probe) -> Outcome:
        """A miss's steps: fill under the lock or wait (local-lock and two-level reuse it)."""
        outcome: Outcome = self.driver.run(self.core.fill_or_wait(key, probe), probe)
        return outcome

    def prime(self, key: str, value: bytes, expire_at_ms: int) -> None:
        def write() -> None:
            self._deps.cache.set(key, value, pxat=expire_at_ms)

        prime_under_lock(self.lock, key, write)

    def _present(self, key: str, probe: Probe) -> bool:
        """Is the value in the cache? If so, it is what this request serves."""
        present: bool = self.driver.run(self.core.present(key, probe), probe)
        return present


@register
class LockDoubleChecked(Lock):
    name: ClassVar[str] = "lock-dc"
    double_check: ClassVar[bool] = True
