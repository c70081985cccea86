"""python-redis-lock (``redis_lock.Lock``): ``SET NX EX`` with an id; a waiter blocks in
``BLPOP`` on a signal list that the release pushes one token to (the next waiter is woken by the
holder's release, not by polling).

Defaults are the library's: ``expire=None`` (the lock never expires; here ``expire=-1``).
The library keeps ``int(expire)`` whole seconds (its issue #16): ``expire=0.5`` became
``SET ... EX 0``, which Redis refuses, and 1.5 a 1 s lock, so an ``expire`` that is not a whole
number of seconds >= 1 is refused before the run (issue 31). ``auto_renewal``
off (on: a renewal thread per acquired lock), ``signal_expire=1000`` ms. With no expire a
waiter's ``BLPOP`` blocks without a server-side bound, so the clients' 2 s socket timeout ends
a wait that long (a ``TimeoutError`` row).
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import ClassVar

import redis_lock

from adapters.recipe import LockRecipe, seconds_or_none
from strategies.base import Deps
from strategies.params import WriteParams


@dataclass(frozen=True)
class PythonRedisLockParams(WriteParams):
    expire: float = -1.0  # lock TTL in whole seconds >= 1 (the library keeps int(expire)); -1: None
    auto_renewal: bool = False
    signal_expire: int = 1000  # ms the wake-up token stays in the signal list

    def __post_init__(self) -> None:
        if self.expire != -1 and not (self.expire >= 1 and self.expire == int(self.expire)):
            raise ValueError(f"expire={self.expire:g}: the library keeps whole seconds (int(expire)), "
                             "so give a whole number of seconds >= 1, or -1 for none (its default)")
        if self.auto_renewal and self.expire == -1:
            raise ValueError("auto_renewal needs an expire (the library refuses it without)")
        if self.signal_expire <= 0:
            raise ValueError("signal_expire must be > 0")


class PythonRedisLock(LockRecipe):
    name: ClassVar[str] = "python-redis-lock"
    Params = PythonRedisLockParams

    def __init__(self, deps: Deps, params: PythonRedisLockParams) -> None:
        super().__init__(deps, params)
        self._params = params

    def locked(self, key: str) -> AbstractContextManager[object]:
        """The library's lock (its keys: ``lock:KEY`` and the signal list ``lock-signal:KEY``)."""
        p = self._params
        lock: AbstractContextManager[object] = redis_lock.Lock(
            self.lock_client, key, expire=seconds_or_none(p.expire), auto_renewal=p.auto_renewal,
            signal_expire=p.signal_expire)
        return lock
