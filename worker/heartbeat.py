"""The worker's heartbeat: the trial's latest progress, sent every interval from a thread of its
own, from the moment the task is received until it returns.

The coordinator (``coordinator.liveness``) declares a worker lost when no new beat arrives for
longer than ``--worker-silence``. The beat number, not the counts, is the sign of life: clients
blocked on a paused cache still beat, a worker stopped (SIGSTOP) or killed does not. Beating from
a thread of its own covers the lead before the start instant and the encoding after the end,
when the client loop reports nothing.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any

from model.wire import BEAT

log = logging.getLogger(__name__)

Send = Callable[[dict[str, Any]], None]


class Heartbeat:
    """``with Heartbeat(send, 0.5) as beat: run(progress=beat.update)``."""

    def __init__(self, send: Send, interval_s: float) -> None:
        self._send, self._interval_s = send, interval_s
        self._counts: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._beat = 0
        self._thread = threading.Thread(target=self._run, name="heartbeat", daemon=True)

    def update(self, counts: Mapping[str, Any]) -> None:
        """The trial's latest counts, sent with the next beat."""
        with self._lock:
            self._counts = dict(counts)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        """Stop before the task returns: a late beat must not follow the task's result."""
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                self._beat += 1
                meta = {**self._counts, BEAT: self._beat}
            try:
                self._send(meta)
            except Exception as exc:  # noqa: BLE001 - a missed beat is what the coordinator watches
                log.warning("heartbeat %d not sent: %s: %s", meta[BEAT], type(exc).__name__, exc)
            self._stop.wait(self._interval_s)
