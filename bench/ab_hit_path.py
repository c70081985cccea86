"""The threaded hit path, A/B in one run (issue 34: the written-once core must keep it within
3 %): A is naive's hit as it was before the port (``PrePort``, kept here as the reference, ten
lines), B the registered ``naive`` (strategies.core behind strategies.drivers.sync), each
timed as ``bench.stages.strategy_ns`` times a strategy (a cache that answers at once) and as a
real lean GET round trip plus the strategy on a real Redis; A and B alternate, round by round.

    python -m bench.ab_hit_path            # also part of make bench

Each figure is CPU ns of the measuring thread per request (``time.thread_time_ns``), the median
of the rounds; B over A per measurement, the median of the rounds' ratios.
"""

from __future__ import annotations

import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import strategies
from bench.stages import VALUE, AtOnce, Unused
from coordinator.stack.redis_server import start_redis
from model.services import RedisPath, redis_commands
from strategies import Deps, Outcome, Probe, version
from strategies.base import HIT
from strategies.commands import Commands

KEY = "stampede:bench:ab"
Fetch = Callable[[str, Probe], Outcome]


class PrePort:
    """Naive's hit before the written-once core (commit 4010724's ``Naive.fetch``)."""

    def __init__(self, cache: Commands) -> None:
        self._cache = cache

    def fetch(self, key: str, probe: Probe) -> Outcome:
        raw = self._cache.get(key)
        if raw is not None:
            version.served(probe, raw)
            return HIT
        raise AssertionError("an all-hit request never misses")


@dataclass(frozen=True)
class Size:
    requests: int = 200_000  # per round at once; a tenth on Redis
    rounds: int = 9


FULL, TINY = Size(), Size(requests=2_000, rounds=2)


def _round_ns(fetch: Fetch, n: int) -> float:
    probe = Probe()
    t0 = time.thread_time_ns()
    for _ in range(n):
        fetch(KEY, probe)
    return (time.thread_time_ns() - t0) / n


def _pair(a: Fetch, b: Fetch, n: int, rounds: int) -> tuple[float, float, float]:
    """A's and B's medians (ns per request) and the median of B / A, rounds alternating."""
    a_ns, b_ns = [], []
    for _ in range(rounds):
        a_ns.append(_round_ns(a, n))
        b_ns.append(_round_ns(b, n))
    ratios = [b / a for a, b in zip(a_ns, b_ns, strict=True)]
    return statistics.median(a_ns), statistics.median(b_ns), statistics.median(ratios)


def _naive(cache: Commands) -> Fetch:
    built = strategies.parse("naive").build(Deps(cache, cache, Unused(), 600_000))
    fetch: Fetch = built.fetch
    return fetch


def measure(size: Size = FULL) -> dict[str, tuple[float, float, float]]:
    """Both measurements: (A ns, B ns, B / A)."""
    at_once: Commands = AtOnce()  # type: ignore[assignment]
    found = {"at-once cache": _pair(PrePort(at_once).fetch, _naive(at_once), size.requests,
                                    size.rounds)}
    workdir = Path(tempfile.mkdtemp(prefix="ab-hit-"))
    proc, url = start_redis("ab-cache", workdir)
    try:
        commands = redis_commands(RedisPath.LEAN, url, 1)
        commands.set(KEY, VALUE)
        found["lean GET on Redis"] = _pair(PrePort(commands).fetch, _naive(commands),
                                           max(size.requests // 10, 100), size.rounds)
        commands.close()
    finally:
        proc.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return found


def run(size: Size = FULL) -> dict[str, tuple[float, float, float]]:
    found = measure(size)
    for name, (a, b, ratio) in found.items():
        print(f"[9] hit path A/B, {name}: before the core (A) {a:,.0f} ns, written-once naive "
              f"(B) {b:,.0f} ns CPU a request; B / A {ratio:.3f} (median of {size.rounds} "
              f"alternating rounds; target <= 1.03 on the lean GET)")
    return found


if __name__ == "__main__":
    run()
