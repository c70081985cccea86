"""One background thread per worker process for work off the request path (swr's refresh).

Each job becomes a row of its own (the caller's ``record``), so an origin call made in the
background is counted like any other and the PostgreSQL cross-check stays exact. A job that
fails becomes an error row, never a silent loss.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable

from strategies.base import Job, Outcome, Probe, StrategyError, error_text

# key, wall-clock start, duration, outcome, probe, error text
Record = Callable[[str, int, int, Outcome, Probe, str | None], None]
_STOP = None


class BackgroundFull(StrategyError):
    """More background jobs queued than the worker holds: the request fails, visibly."""


class BackgroundWorker:
    """A ``Background``: runs jobs in order on one thread and records each."""

    def __init__(self, record: Record, capacity: int = 1024) -> None:
        self._record = record
        self._queue: queue.Queue[tuple[str, Job] | None] = queue.Queue(capacity)
        self._thread = threading.Thread(target=self._run, name="background", daemon=True)
        self._thread.start()

    def submit(self, key: str, job: Job) -> None:
        try:
            self._queue.put_nowait((key, job))
        except queue.Full:
            raise BackgroundFull(f"{self._queue.maxsize} background jobs pending") from None

    def close(self, timeout_s: float = 10.0) -> None:
        """Finish the queued jobs, then stop; raise if the thread does not end in time."""
        self._queue.put(_STOP, timeout=timeout_s)
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            raise TimeoutError(f"background jobs still running after {timeout_s} s")

    def _run(self) -> None:
        while (item := self._queue.get()) is not _STOP:
            key, job = item
            probe = Probe()
            t_start = time.time_ns()
            t0 = time.perf_counter_ns()
            error = None
            try:
                outcome = job(probe)
            except Exception as exc:  # noqa: BLE001 - recorded below as an error row
                outcome = Outcome.ERROR
                error = error_text(exc)
            self._record(key, t_start, time.perf_counter_ns() - t0, outcome, probe, error)
