"""The asyncio driver's pub/sub listener: one task per subscribing core (two-level's
invalidations), on a redis.asyncio connection of its own to the cache, started with the trial
(``start``, subscribed before it returns) and closed at its end (``close``).

As the threaded listener (``strategies.drivers.listen``): a cache that fails under it is told to
the core (``outage``) and subscribed to again every ``RESUBSCRIBE_S``; any other failure is a
bug, kept in ``error`` and raised by ``close``, so the trial that ran without invalidations
fails rather than poses as two-level's.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable
from typing import Any

import redis
import redis.asyncio

from strategies.core.effects import Subscriber, subscriber
from strategies.drivers.listen import RESUBSCRIBE_S

TIMEOUT_S = 2.0  # connect and reply, as the trial's other connections


class AsyncInvalidations:
    """The listener task: each message on ``core.channel`` goes to ``core.heard``."""

    def __init__(self, url: str, core: Subscriber) -> None:
        self.error: BaseException | None = None
        self.down: redis.RedisError | None = None
        self._core = core
        self._client = redis.asyncio.Redis.from_url(url, socket_connect_timeout=TIMEOUT_S)
        self._pubsub: Any = None
        self._task: asyncio.Task[None] | None = None

    @classmethod
    async def start(cls, url: str, core: Subscriber) -> AsyncInvalidations:
        """Subscribed when it returns (a publish from now on is heard), then listening."""
        self = cls(url, core)
        try:
            await self._subscribe()
        except BaseException:
            await self._client.aclose()
            raise
        self._task = asyncio.get_running_loop().create_task(self._run(), name="invalidations")
        return self

    async def _subscribe(self) -> None:
        pubsub: Any = self._client.pubsub(ignore_subscribe_messages=True)
        try:
            await pubsub.subscribe(self._core.channel)
        except BaseException:
            await pubsub.aclose()
            raise
        self._pubsub = pubsub

    async def _run(self) -> None:
        try:
            while True:
                try:
                    await self._listen()
                except redis.RedisError as exc:
                    self.down = exc
                    self._core.outage()  # a read racing the outage stores no local copy
                    await asyncio.sleep(RESUBSCRIBE_S)
        except Exception as exc:  # noqa: BLE001 - kept and raised by close
            self.error = exc

    async def _listen(self) -> None:
        if self.down is not None:
            with contextlib.suppress(redis.RedisError, OSError):
                await self._pubsub.aclose()
            await self._subscribe()
            self.down = None
        message = await self._pubsub.get_message(ignore_subscribe_messages=True, timeout=0.1)
        if message is not None:
            self._core.heard(message["data"])

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        with contextlib.suppress(redis.RedisError, OSError):
            await self._pubsub.aclose()
            await self._client.aclose()
        if self.error is not None:
            raise RuntimeError(f"invalidation listener died: {self.error!r}") from self.error


async def start_all(strategies: Iterable[Any], url: str) -> list[AsyncInvalidations]:
    """A listener for each strategy whose core subscribes (none for the others)."""
    listeners: list[AsyncInvalidations] = []
    try:
        for strategy in strategies:
            core = subscriber(getattr(strategy, "core", strategy))
            if core is not None:
                listeners.append(await AsyncInvalidations.start(url, core))
    except BaseException:
        await close_all(listeners)
        raise
    return listeners


async def close_all(listeners: Iterable[AsyncInvalidations]) -> None:
    """Close every listener; the first that died raises, after all are closed."""
    failed: BaseException | None = None
    for listener in listeners:
        try:
            await listener.close()
        except RuntimeError as exc:
            failed = failed or exc
    if failed is not None:
        raise failed
