"""Lock-based single flight: the client that takes the lock fills, the others wait and re-read.

``lock`` is the variant experiment 000 measured: a client that read a miss and wins the lock
after the value is back computes it again. ``lock-dc`` reads the cache once more after taking
the lock (double-checked locking), which closes that gap.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from strategies import version
from strategies.base import HIT, Deps, Outcome, Probe
from strategies.flight import SingleFlight
from strategies.locking import lock_key
from strategies.params import LockParams, Ttl
from strategies.registry import register


def prime_under_lock(flight: SingleFlight, key: str, write: Callable[[], None]) -> None:
    """Prime under the same lock the clients use, as experiment 000 did."""
    token = flight.lock.try_acquire(lock_key(key))
    if token is None:
        raise RuntimeError(f"cannot prime {key!r}: its lock is held")
    try:
        write()
    finally:
        flight.lock.release(lock_key(key), token)


@register
class Lock(version.CacheAside):
    name: ClassVar[str] = "lock"
    Params = LockParams
    double_check: ClassVar[bool] = False

    def __init__(self, deps: Deps, params: LockParams) -> None:
        self._deps = deps
        self._ttl = Ttl(deps.ttl_ms, params.jitter, deps.expiry_grid)
        self.flight = SingleFlight(deps, params, self.double_check)
        self._on_write_from(params)

    def fetch(self, key: str, probe: Probe) -> Outcome:
        if self._present(key, probe):
            return HIT
        return self.fill_or_wait(key, probe)

    def fill_or_wait(self, key: str, probe: Probe) -> Outcome:
        return self.flight.run(key, probe, lambda: self._present(key, probe),
                               lambda p: self._fill(key, p))

    def prime(self, key: str, value: bytes, expire_at_ms: int) -> None:
        def write() -> None:
            self._deps.cache.set(key, value, pxat=expire_at_ms)

        prime_under_lock(self.flight, key, write)

    def _present(self, key: str, probe: Probe) -> bool:
        """Is the value in the cache? If so, it is what this request serves."""
        raw = self._deps.cache.get(key)
        if raw is None:
            return False
        version.served(probe, raw)
        return True


@register
class LockDoubleChecked(Lock):
    name: ClassVar[str] = "lock-dc"
    double_check: ClassVar[bool] = True
