"""Waiting for another client's fill, bounded: by polling, or woken by the filler.

``notify`` uses a per-key wake list instead of pub/sub: the filler pushes a token after it
writes the value, a waiter blocks in BLPOP and pushes the token back so the next waiter wakes
too. A push that happens before the waiter blocks stays in the list, so no wake-up is lost
(pub/sub would drop a message published before the SUBSCRIBE).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager

from strategies.commands import Commands
from strategies.locking import lock_store
from strategies.params import WaitParams, Wake

_TOKEN = b"1"
MAX_BLOCK_S = 1.0  # one BLPOP stays well under the clients' 2 s socket timeout


def wake_key(key: str) -> str:
    return f"wake:{key}"


class Waiter:
    """One pause between two looks at the cache, by the wake mode of ``params``."""

    def __init__(self, client: Commands, params: WaitParams, token_ttl_ms: int,
                 guard: Callable[[], AbstractContextManager[None]] = lock_store) -> None:
        """``guard`` classifies the wake list's failures: the lock store's by default; lease
        keeps its wake list on the cache, whose failures stay cache errors (RedisError)."""
        self._client = client
        self._guard = guard
        self._notify = params.wake is Wake.NOTIFY
        self._poll_s = params.poll_ms / 1000
        self._max_wait_ns = int(params.max_wait_ms * 1e6)
        self._token_ttl_ms = token_ttl_ms

    def deadline_ns(self, started_ns: int) -> int:
        return started_ns + self._max_wait_ns

    def pause(self, key: str, deadline_ns: int) -> None:
        """Sleep ``poll_ms`` or block until woken; never past ``deadline_ns``."""
        remaining_s = (deadline_ns - time.perf_counter_ns()) / 1e9
        if not self._notify:
            time.sleep(max(0.0, min(self._poll_s, remaining_s)))
            return
        if remaining_s <= 0.001:
            return  # BLPOP with timeout 0 would block forever
        name = wake_key(key)
        with self._guard():
            if self._client.blpop(name, min(remaining_s, MAX_BLOCK_S)) is not None:
                self._client.rpush(name, _TOKEN)

    def reset(self, key: str) -> None:
        """A new fill begins: drop the previous fill's token (notify only)."""
        if self._notify:
            with self._guard():
                self._client.delete(wake_key(key))

    def wake(self, key: str) -> None:
        """The value is written: wake every waiter (notify only); the token expires by itself."""
        if self._notify:
            with self._guard():
                self._client.pipeline(("RPUSH", wake_key(key), _TOKEN),
                                      ("PEXPIRE", wake_key(key), self._token_ttl_ms))
