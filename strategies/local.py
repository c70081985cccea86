"""``local-lock``: single flight inside one worker process, layered under the distributed lock.

Threads of one process that miss the same key elect one leader (Go's singleflight); only the
leader takes part in lock-dc against the lock store, the others wait on an in-process event.
So one worker sends one lock attempt per key, not one per thread.

``distributed=false`` drops the distributed layer: the leader reads the cache again and fills
itself (Go's singleflight alone, as a service without a lock store runs it). The herd of an
expiry is then bounded by the number of processes, not by the clients: what the app tier shows.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import ClassVar

from strategies.base import Deps, LockWaitTimeout, Outcome, Probe, StrategyError
from strategies.lock import Lock
from strategies.params import LockParams
from strategies.registry import register


@dataclass(frozen=True)
class LocalLockParams(LockParams):
    """``distributed``: the leader fills under lock-dc's distributed lock (True) or alone."""

    distributed: bool = True


class _Call:
    __slots__ = ("done", "error", "version")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.error: BaseException | None = None
        self.version = -1  # what the leader served: the followers serve the same value


@register
class LocalLock(Lock):
    name: ClassVar[str] = "local-lock"
    double_check: ClassVar[bool] = True
    sans_io: ClassVar[bool] = False  # not ported: its in-process leader is threaded

    Params = LocalLockParams

    def __init__(self, deps: Deps, params: LocalLockParams) -> None:
        super().__init__(deps, params)
        self._distributed = params.distributed
        self._max_wait_s = params.max_wait_ms / 1000
        self._calls: dict[str, _Call] = {}
        self._mutex = threading.Lock()

    def fill_or_wait(self, key: str, probe: Probe) -> Outcome:
        with self._mutex:
            call = self._calls.get(key)
            leader = call is None
            if call is None:
                call = self._calls[key] = _Call()
        if leader:
            return self._lead(key, call, probe)
        return self._follow(key, call, probe)

    def _lead(self, key: str, call: _Call, probe: Probe) -> Outcome:
        try:
            outcome = super().fill_or_wait(key, probe) if self._distributed else self._alone(key, probe)
            call.version = probe.version_served
            return outcome
        except BaseException as exc:
            call.error = exc
            raise
        finally:
            with self._mutex:
                del self._calls[key]
            call.done.set()

    def _alone(self, key: str, probe: Probe) -> Outcome:
        """The leader without the distributed lock: read again (another process, or an
        earlier leader of this one, may have filled since the miss), else fill."""
        if self._present(key, probe):
            return Outcome.HIT
        self._fill(key, probe)
        return Outcome.FILLED

    def _follow(self, key: str, call: _Call, probe: Probe) -> Outcome:
        started = time.perf_counter_ns()
        if not call.done.wait(self._max_wait_s):
            raise LockWaitTimeout(f"in-process leader for {key!r} still busy after "
                                  f"{self._max_wait_s * 1000:g} ms")
        probe.lock_wait_ns = time.perf_counter_ns() - started
        if call.error is not None:
            raise StrategyError(f"in-process leader failed: {type(call.error).__name__}: "
                                f"{call.error}")
        probe.version_served = call.version
        return Outcome.WAITED
