"""The threaded driver's pub/sub listener: one thread per subscribing core (two-level's
invalidations), on a connection of its own to the cache.

A cache that fails under it (killed, restarted) is not the listener's death: it subscribes
again every ``RESUBSCRIBE_S`` until the cache answers, as a production listener must, and tells
the core (``outage``) so that no read racing the outage stores a copy. While it is away,
messages can be missed; two-level's local copy still lives at most ``local_ttl_ms``, the bound
it promises without invalidation. Any other failure is a bug: kept in ``error`` and raised by
every later fetch.
"""

from __future__ import annotations

import threading

import redis
from redis.client import PubSub

from strategies.commands import Commands
from strategies.core.effects import Subscriber

RESUBSCRIBE_S = 0.2  # how often a listener whose cache failed tries to subscribe again


class Invalidations:
    """The listener thread: each message on ``core.channel`` goes to ``core.heard``."""

    def __init__(self, client: Commands, core: Subscriber) -> None:
        self.error: BaseException | None = None
        self.down: redis.RedisError | None = None  # the cache failed under the listener
        self._client = client
        self._core = core
        self._stop = threading.Event()
        self._pubsub = self._subscribe()
        self._thread = threading.Thread(target=self._run, name="invalidations", daemon=True)
        self._thread.start()

    def _subscribe(self) -> PubSub:
        pubsub = self._client.pubsub()
        try:
            pubsub.subscribe(self._core.channel)
        except BaseException:
            pubsub.close()
            raise
        return pubsub

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                try:
                    self._listen()
                except redis.RedisError as exc:
                    self.down = exc
                    self._core.outage()  # a read racing the outage stores no local copy
                    self._stop.wait(RESUBSCRIBE_S)
        except BaseException as exc:  # noqa: BLE001 - kept and raised by every later fetch
            self.error = exc
        finally:
            self._pubsub.close()

    def _listen(self) -> None:
        if self.down is not None:
            self._pubsub.close()
            self._pubsub = self._subscribe()
            self.down = None
        message = self._pubsub.get_message(timeout=0.1)
        if message is not None:
            self._core.heard(message["data"])

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5.0)
