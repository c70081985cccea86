"""``local-lock``: single flight inside one worker process, layered under the distributed lock.

Threads of one process that miss the same key elect one leader (Go's singleflight); only the
leader takes part in lock-dc against the lock store, the others wait for it in-process.
So one worker sends one lock attempt per key, not one per thread.

``distributed=false`` drops the distributed layer: the leader reads the cache again and fills
itself (Go's singleflight alone, as a service without a lock store runs it). The herd of an
expiry is then bounded by the number of processes, not by the clients: what the app tier shows.

The logic is ``strategies.core.local.LocalLockCore``; this class runs it on the threaded driver
(the followers park on a ``threading.Event``), the asyncio driver and the simulator run the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from strategies.base import Deps, Outcome, Probe
from strategies.core.local import LocalLockCore
from strategies.drivers.sync import Driven, clock_of
from strategies.lock import Lock
from strategies.params import LockParams
from strategies.registry import register


@dataclass(frozen=True)
class LocalLockParams(LockParams):
    """``distributed``: the leader fills under lock-dc's distributed lock (True) or alone."""

    distributed: bool = True


@register
class LocalLock(Lock):
    name: ClassVar[str] = "local-lock"
    double_check: ClassVar[bool] = True
    core: LocalLockCore

    Params = LocalLockParams

    def __init__(self, deps: Deps, params: LocalLockParams) -> None:
        super().__init__(deps, params)
        self.core = LocalLockCore(self._ttl, clock_of(deps), params, params.distributed)

    def miss(self, key: str, raw: bytes | None, probe: Probe) -> Outcome:
        """The core's miss (the in-process flight), not lock's bare fill-or-wait."""
        return Driven.miss(self, key, raw, probe)
