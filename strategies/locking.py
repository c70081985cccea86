"""A Redis lock with an owner token: only the holder that set it can delete it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import redis

from strategies.base import LockStoreDown
from strategies.commands import Commands

# Compare-and-delete in one server-side step, so a holder whose lock already expired cannot
# delete the lock that another client took after it.
_RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then
    return redis.call('del', KEYS[1])
end
return 0
"""


def lock_key(key: str) -> str:
    return f"lock:{key}"


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
