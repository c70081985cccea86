"""Lock-based single flight: the client that takes the lock fills, the others wait and re-read.

``lock`` is the variant experiment 000 measured: a client that read a miss and wins the lock
after the value is back computes it again. ``lock-dc`` reads the cache once more after taking
the lock (double-checked locking), which closes that gap.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import ClassVar

from strategies.base import Deps, LockWaitTimeout, Outcome, Probe
from strategies.locking import OwnedLock, lock_key
from strategies.registry import register


@dataclass(frozen=True)
class LockParams:
    poll_ms: float = 5.0
    max_wait_ms: float = 1000.0
    lock_ttl_ms: int = 1000

    def __post_init__(self) -> None:
        if self.poll_ms <= 0:
            raise ValueError("poll_ms must be > 0")
        if self.max_wait_ms < self.poll_ms:
            raise ValueError("max_wait_ms must be >= poll_ms")
        if self.lock_ttl_ms <= 0:
            raise ValueError("lock_ttl_ms must be > 0")


@register
class Lock:
    name: ClassVar[str] = "lock"
    Params = LockParams
    double_check: ClassVar[bool] = False

    def __init__(self, deps: Deps, params: LockParams) -> None:
        self._deps = deps
        self._params = params
        self._lock = OwnedLock(deps.locks, params.lock_ttl_ms)

    def fetch(self, key: str, probe: Probe) -> Outcome:
        if self._deps.cache.get(key) is not None:
            return Outcome.HIT
        return self._fill_or_wait(key, probe)

    def prime(self, key: str, value: bytes, expire_at_ms: int) -> None:
        """Prime under the same lock the clients use, as experiment 000 did."""
        name = lock_key(key)
        token = self._lock.try_acquire(name)
        if token is None:
            raise RuntimeError(f"cannot prime {key!r}: its lock {name!r} is held")
        try:
            self._deps.cache.set(key, value, pxat=expire_at_ms)
        finally:
            self._lock.release(name, token)

    def _fill_or_wait(self, key: str, probe: Probe) -> Outcome:
        name = lock_key(key)
        started = time.perf_counter_ns()
        deadline = started + int(self._params.max_wait_ms * 1e6)
        poll_s = self._params.poll_ms / 1000
        while True:
            token = self._lock.try_acquire(name)
            if token is not None:
                probe.lock_wait_ns = time.perf_counter_ns() - started
                return self._fill(key, name, token, probe)
            time.sleep(poll_s)
            if self._deps.cache.get(key) is not None:
                probe.lock_wait_ns = time.perf_counter_ns() - started
                return Outcome.WAITED
            if time.perf_counter_ns() >= deadline:
                raise LockWaitTimeout(f"no value for {key!r} after {self._params.max_wait_ms} ms")

    def _fill(self, key: str, name: str, token: bytes, probe: Probe) -> Outcome:
        try:
            if self.double_check and self._deps.cache.get(key) is not None:
                return Outcome.WAITED
            value = self._deps.loader.load(key, probe)
            self._deps.cache.set(key, value, px=self._deps.ttl_ms)
            return Outcome.FILLED
        finally:
            self._lock.release(name, token)


@register
class LockDoubleChecked(Lock):
    name: ClassVar[str] = "lock-dc"
    double_check: ClassVar[bool] = True
