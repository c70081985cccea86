"""A Redis lock with an owner token, called directly: priming takes it outside any request (the
requests' lock is ``strategies.core.flight``, the same commands as steps)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import redis

from strategies.base import LockStoreDown
from strategies.commands import Commands
from strategies.core.flight import RELEASE as _RELEASE
from strategies.core.flight import lock_key

__all__ = ["OwnedLock", "lock_key", "lock_store"]


@contextmanager
def lock_store() -> Iterator[None]:
    """Turn any failure of the lock store into LockStoreDown, which the policy handles."""
    try:
        yield
    except redis.RedisError as exc:
        raise LockStoreDown(f"{type(exc).__name__}: {exc}") from exc


class OwnedLock:
    """``SET NX PX`` with a random token; release by compare-and-delete."""

    def __init__(self, client: Commands, ttl_ms: int) -> None:
        self._client = client
        self._ttl_ms = ttl_ms
        self._release = client.script(_RELEASE)

    def try_acquire(self, name: str) -> bytes | None:
        """Return the owner token if this call took the lock, else None."""
        token = os.urandom(8).hex().encode()
        with lock_store():
            if self._client.set(name, token, nx=True, px=self._ttl_ms):
                return token
        return None

    def release(self, name: str, token: bytes) -> bool:
        """Delete the lock if ``token`` still owns it; False when it had expired or moved on."""
        with lock_store():
            return bool(self._release([name], [token]))
