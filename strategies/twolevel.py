"""``two-level``: an in-process cache (short local TTL) in front of Redis, lock-dc behind it.

Whoever rewrites a value publishes its key on a Redis pub/sub channel; every worker process
listens (the driver's listener: a thread, strategies.drivers.listen, or an asyncio task,
strategies.drivers.aio_listen) and drops its local copy. A generation counter stops a read
that raced with an invalidation from storing the old value locally. Local hits are ``hit`` rows with
``local_hit`` = 1. Without invalidation a local copy is at most ``local_ttl_ms`` old past its
rewrite; with it, about one pub/sub delivery.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import ClassVar

from strategies import version
from strategies.base import Deps, Outcome, Probe, StrategyError
from strategies.commands import set_command
from strategies.core.twolevel import CHANNEL, TwoLevelCore
from strategies.drivers.listen import RESUBSCRIBE_S, Invalidations
from strategies.drivers.sync import clock_of
from strategies.lock import Lock
from strategies.params import Expiry, LockParams
from strategies.registry import register

__all__ = ["CHANNEL", "RESUBSCRIBE_S", "Invalidations", "TwoLevel", "TwoLevelParams"]


@dataclass(frozen=True)
class TwoLevelParams(LockParams):
    local_ttl_ms: float = 200.0

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.local_ttl_ms > 0:
            raise ValueError("local_ttl_ms must be > 0")


@register
class TwoLevel(Lock):
    name: ClassVar[str] = "two-level"
    Params = TwoLevelParams
    double_check: ClassVar[bool] = True
    sans_io: ClassVar[bool] = True  # its logic: strategies.core.twolevel; its listener: the driver's
    core: TwoLevelCore  # type: ignore[assignment]  # lock-dc's parts it has, not LockCore's hit

    def __init__(self, deps: Deps, params: TwoLevelParams) -> None:
        super().__init__(deps, params)
        self.core = TwoLevelCore(self._ttl, clock_of(deps), params, params.local_ttl_ms)
        self.local = self.core.local
        # the threaded driver's listener; built for another driver, that driver listens
        self._invalidations = Invalidations(deps.cache, self.core) if deps.listen else None

    def fetch(self, key: str, probe: Probe) -> Outcome:
        """The core's ``steps``, inline: a local or a cache hit starts no generator."""
        listener = self._invalidations
        if listener is not None and listener.error is not None:
            raise StrategyError(f"invalidation listener died: {listener.error!r}")
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
        if self._invalidations is not None:
            self._invalidations.close()
