"""Clock alignment across hosts: measure each worker's offset, refuse what cannot be aligned.

Every worker timestamp is moved onto the coordinator's clock (coordinator/trials/runner.py), so an
expiry event seen by two hosts lines up. The offset comes from the round trip with the least
delay (NTP's rule); half that round trip bounds the error. A clock task travels through the
broker, so the round trip also says how long a dispatched task takes to arrive: the start
instant must leave the slowest worker that much time, many times over.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

from celery import Celery
from celery.utils import worker_direct

from coordinator.defaults import Timing
from model.wire import CLOCK

ROUNDS = 7
REPLY_TIMEOUT_S = 10.0
MAX_UNCERTAINTY_OF_TTL = 0.05  # an offset known only to within 5% of the TTL blurs expiry events
LEAD_RTT_MULTIPLE = 50  # lead >= this many median task round trips of the slowest worker


class ClockError(RuntimeError):
    """Worker clocks cannot be aligned well enough for the TTL being measured."""


def measure_one(ask: Callable[[], int], rounds: int = ROUNDS) -> dict[str, int]:
    """Offset (theirs minus ours) from the fastest of ``rounds`` round trips; also the median."""
    samples = []
    for _ in range(rounds):
        sent = time.time_ns()
        theirs = ask()
        back = time.time_ns()
        samples.append((back - sent, theirs - (sent + back) // 2))
    rtt, offset = min(samples)
    return {"offset_ns": offset, "uncertainty_ns": rtt // 2, "rtt_min_ns": rtt,
            "rtt_median_ns": round(statistics.median(s[0] for s in samples)), "rounds": rounds}


def measure_offsets(app: Celery, workers: Sequence[str],
                    rounds: int = ROUNDS) -> dict[str, dict[str, int]]:
    """Each worker's clock offset and its uncertainty, through the worker's own queue."""

    def asker(name: str) -> Callable[[], int]:
        return lambda: int(app.send_task(CLOCK, queue=worker_direct(name)).get(
            timeout=REPLY_TIMEOUT_S))

    return {name: measure_one(asker(name), rounds) for name in workers}


def check_uncertainty(offsets: dict[str, dict[str, int]], ttl_s: float, force: bool) -> list[str]:
    """Refuse (ClockError) when an offset is too uncertain for ``ttl_s``; with ``force``, warn."""
    limit_ns = ttl_s * 1e9 * MAX_UNCERTAINTY_OF_TTL
    bad = {name: o["uncertainty_ns"] for name, o in offsets.items() if o["uncertainty_ns"] > limit_ns}
    if not bad:
        return []
    worst = ", ".join(f"{name} ±{ns / 1e6:.1f} ms" for name, ns in sorted(bad.items()))
    message = (f"clock offset uncertainty above {MAX_UNCERTAINTY_OF_TTL:.0%} of the {ttl_s:g} s TTL "
               f"({limit_ns / 1e6:.1f} ms): {worst}")
    if not force:
        raise ClockError(f"{message}; use a longer --ttl, a closer broker, or --force-clock")
    return [f"{message} (--force-clock: timestamps of these workers are less certain)"]


def lead_s(offsets: dict[str, dict[str, Any]], timing: Timing) -> float:
    """Dispatch-to-start time: at least ``timing.lead_s`` and many slowest round trips."""
    slowest_ns = max((int(o["rtt_median_ns"]) for o in offsets.values()), default=0)
    return max(timing.lead_s, LEAD_RTT_MULTIPLE * slowest_ns / 1e9)
