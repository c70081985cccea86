"""``two-level``: an in-process cache (short local TTL) in front of Redis, lock-dc behind it.

Whoever rewrites a value publishes its key on a Redis pub/sub channel; every worker process
listens on one thread and drops its local copy. A generation counter stops a read that raced
with an invalidation from storing the old value locally. Local hits are ``hit`` rows with
``local_hit`` = 1. Without invalidation a local copy is at most ``local_ttl_ms`` old past its
rewrite; with it, about one pub/sub delivery.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import ClassVar

import redis
from redis.client import PubSub

from strategies import version
from strategies.base import Deps, Outcome, Probe, StrategyError
from strategies.commands import Commands, set_command
from strategies.core.twolevel import CHANNEL, TwoLevelCore
from strategies.drivers.sync import clock_of
from strategies.lock import Lock
from strategies.params import Expiry, LockParams
from strategies.registry import register

RESUBSCRIBE_S = 0.2  # how often a listener whose cache failed tries to subscribe again


@dataclass(frozen=True)
class TwoLevelParams(LockParams):
    local_ttl_ms: float = 200.0

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.local_ttl_ms > 0:
            raise ValueError("local_ttl_ms must be > 0")


class Invalidations:
    """The listener thread: drops local copies named on the channel.

    A cache that fails under it (killed, restarted) is not the listener's death: it subscribes
    again every ``RESUBSCRIBE_S`` until the cache answers, as a production listener must. While
    it is away, invalidations can be missed; a local copy still lives at most ``local_ttl_ms``,
    the bound two-level promises without invalidation. Any other failure is a bug: kept in
    ``error`` and raised by every later fetch.
    """

    def __init__(self, client: Commands, core: TwoLevelCore) -> None:
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
            pubsub.subscribe(CHANNEL)
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
            self._core.invalidate(message["data"].decode())

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5.0)


@register
class TwoLevel(Lock):
    name: ClassVar[str] = "two-level"
    Params = TwoLevelParams
    double_check: ClassVar[bool] = True
    # not ported: its logic is (strategies.core.twolevel), its invalidation listener is a thread
    sans_io: ClassVar[bool] = False
    core: TwoLevelCore

    def __init__(self, deps: Deps, params: TwoLevelParams) -> None:
        super().__init__(deps, params)
        self.core = TwoLevelCore(self._ttl, clock_of(deps), params, params.local_ttl_ms)
        self.local = self.core.local
        self._invalidations = Invalidations(deps.cache, self.core)

    def fetch(self, key: str, probe: Probe) -> Outcome:
        """The core's ``steps``, inline: a local or a cache hit starts no generator."""
        if self._invalidations.error is not None:
            raise StrategyError(f"invalidation listener died: {self._invalidations.error!r}")
        core = self.core
        outcome = core.local_hit(key, probe)
        if outcome is not None:
            return outcome
        generation = core.generation
        raw = self._deps.cache.get(key)
        outcome = core.remote_hit(key, raw, generation, probe)
        if outcome is None:
            return self.fill_or_wait(key, probe)
        return outcome

    def write(self, key: str, value: bytes, expiry: Expiry, probe: Probe) -> None:
        """Rewrite a value in Redis and tell every process to drop its local copy."""
        sent = time.time_ns()
        self._deps.cache.pipeline(set_command(key, value, px=expiry.px, pxat=expiry.pxat),
                                  ("PUBLISH", CHANNEL, key))
        version.stored(probe, value, sent)

    def on_write(self, key: str, probe: Probe) -> None:
        """Delete (or write through) in Redis and publish: every process drops its local copy."""
        if self._update:
            self._fill(key, probe)
            return
        self._deps.cache.pipeline(("DEL", key), ("PUBLISH", CHANNEL, key))

    def close(self) -> None:
        self._invalidations.close()
