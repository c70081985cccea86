"""The load generator watching itself: a saturated generator inflates the latencies it reports.

Two signals per worker process, both cheap enough to run beside the clients:

- CPU share: process CPU time over wall time during the trial. A CPython process is GIL-bound,
  so a share near 1.0 (one core) means the clients queue for the interpreter, not the cache.
- Loop lag: a sampler thread asks to wake every ``interval_s`` and records how late it wakes.
  Threads that wait for the GIL or for a CPU show up as lag, the way a stalled event loop does.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

# Each wake costs about 50 us of CPU on this project's VM (the thread's sleep, its wake, its GIL
# hand-off): every 10 ms that was 10 ms a second per worker, 1.2 us a request of the all-hit
# trial (bench.stages). Every 25 ms keeps 40 samples a second, 200 in a 5-s trial, for a p99
# that is compared with LAG_SATURATED_MS (20 ms).
SAMPLE_INTERVAL_S = 0.025
MAX_SAMPLES = 200_000  # bounded however long the trial


@dataclass(frozen=True)
class GeneratorLoad:
    cpu_share: float  # process CPU seconds per wall second (1.0 = one core busy)
    lag_p99_ns: int
    lag_max_ns: int
    samples: int


class GeneratorMonitor:
    """Start before the clients are released, stop after they finish."""

    def __init__(self, interval_s: float = SAMPLE_INTERVAL_S) -> None:
        self._interval_ns = int(interval_s * 1e9)
        self._stop = threading.Event()
        self._lags: list[int] = []
        self._thread = threading.Thread(target=self._sample, name="loop-lag", daemon=True)
        self._cpu0 = self._wall0 = 0.0

    def start(self) -> GeneratorMonitor:
        self._cpu0, self._wall0 = time.process_time(), time.monotonic()
        self._thread.start()
        return self

    @property
    def ident(self) -> int | None:
        """The sampler thread's id once started (its CPU clock: bench.stages)."""
        return self._thread.ident

    def _sample(self) -> None:
        while not self._stop.is_set() and len(self._lags) < MAX_SAMPLES:
            asked = time.perf_counter_ns()
            time.sleep(self._interval_ns / 1e9)
            self._lags.append(max(0, time.perf_counter_ns() - asked - self._interval_ns))

    def stop(self) -> GeneratorLoad:
        cpu, wall = time.process_time() - self._cpu0, time.monotonic() - self._wall0
        self._stop.set()
        if self._thread.ident is not None:  # never started when the release itself failed
            self._thread.join(timeout=5.0)
        lags = sorted(self._lags)
        p99 = lags[min(len(lags) - 1, int(len(lags) * 0.99))] if lags else 0
        return GeneratorLoad(cpu / wall if wall > 0 else 0.0, p99, lags[-1] if lags else 0,
                             len(lags))
