"""redis-py's own lock, ``Redis.lock()``: ``SET NX PX`` with a token, a token-checked Lua
release, and waiters that poll (sleep ``sleep`` seconds between attempts).

Defaults are redis-py's: ``timeout=None`` (the lock never expires), ``sleep=0.1``,
``blocking_timeout=None`` (a waiter waits as long as it takes), ``thread_local=True``. Given
here as numbers: -1 stands for None. A waiter that gives up (``blocking_timeout``) is an error
row of redis-py's ``LockError``.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import ClassVar

from adapters.recipe import LockRecipe, check_timeout, seconds_or_none
from strategies.base import Deps
from strategies.locking import lock_key
from strategies.params import WriteParams


@dataclass(frozen=True)
class RedisPyLockParams(WriteParams):
    timeout: float = -1.0  # lock TTL in seconds; -1: None, never expires (redis-py's default)
    sleep: float = 0.1  # seconds between a waiter's attempts
    blocking_timeout: float = -1.0  # seconds a waiter tries; -1: None, for ever
    thread_local: bool = True

    def __post_init__(self) -> None:
        check_timeout("timeout", self.timeout)
        check_timeout("blocking_timeout", self.blocking_timeout)
        if not self.sleep > 0:
            raise ValueError("sleep must be > 0")


class RedisPyLock(LockRecipe):
    name: ClassVar[str] = "redis-py-lock"
    Params = RedisPyLockParams

    def __init__(self, deps: Deps, params: RedisPyLockParams) -> None:
        super().__init__(deps, params)
        self._params = params

    def locked(self, key: str) -> AbstractContextManager[object]:
        p = self._params
        lock: AbstractContextManager[object] = self.lock_client.lock(
            lock_key(key), timeout=seconds_or_none(p.timeout), sleep=p.sleep,
            blocking_timeout=seconds_or_none(p.blocking_timeout), thread_local=p.thread_local)
        return lock
