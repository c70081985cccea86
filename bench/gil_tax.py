"""Benchmark 12: what a microsecond of Python costs a request among 25 client threads a process.

Benchmark 1 finds the all-hit trial's worker processes spending more per request than the
lean loop by several times the Python a row adds on one thread (its breakdown). This measures
that price directly, with nothing of the product in the loop: the plain-socket floor of
benchmark 1 (``worker.baseline.socket_loop``: a socket, a ``hiredis.Reader``, ``GET`` packed
once) with ``extra_us`` of plain Python spun after each reply, on 8 processes x 25 threads
against one server, rounds alternating. The rate at each ``extra_us`` over the rate at 0 is what
efficiency a generator doing that much Python per request beside the floor's could reach here;
the figure a request's extra microsecond costs in CPU is the slope of CPU per request.

    python -m bench.gil_tax          # about 2 minutes; part of `make bench`
"""

from __future__ import annotations

import shutil
import socket
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import hiredis
import redis

from bench import forked
from coordinator.stack.redis_server import start_redis
from worker.baseline import socket_loop

KEY = "stampede:bench:gil-tax"
SPIN_UNIT = 1000  # iterations of the spin whose CPU time is calibrated


@dataclass(frozen=True)
class Size:
    processes: int = 8
    threads: int = 25
    seconds: float = 4.0
    rounds: int = 3
    extra_us: tuple[float, ...] = (0.0, 1.0, 2.0, 3.0)


FULL, TINY = Size(), Size(processes=2, threads=2, seconds=0.3, rounds=1, extra_us=(0.0, 1.0))


def spin(iterations: int) -> int:
    """Plain Python, holding the GIL: ``iterations`` additions."""
    total = 0
    for i in range(iterations):
        total += i
    return total


def iterations_per_us() -> float:
    """How many of ``spin``'s iterations take a microsecond of this thread's CPU (the best of
    several: one thread alone, unloaded)."""
    best = float("inf")
    for _ in range(7):
        t0 = time.thread_time_ns()
        spin(SPIN_UNIT * 100)
        best = min(best, (time.thread_time_ns() - t0) / (SPIN_UNIT * 100))
    return 1000.0 / best


def _count(url: str, threads: int, iterations: int) -> forked.Count:
    """One worker-like process: ``threads`` floor loops, each reply followed by the spin."""
    def count(index: int, start_ns: int, end_ns: int) -> int:
        if iterations == 0:
            return forked.in_threads(threads, socket_loop(url, KEY), start_ns, end_ns)
        return forked.in_threads(threads, lambda end: _spun_loop(url, iterations, end),
                                 start_ns, end_ns)
    return count


def _spun_loop(url: str, iterations: int, end_ns: int) -> int:
    """The floor loop of ``worker.baseline.socket_loop`` with the spin after each reply (its
    own copy: the floor's loop stays without even a check for it)."""
    parts = urlsplit(url)
    sock = socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 6379), 2.0)
    sock.settimeout(None)  # blocking, as the floor's: a Python timeout polls before each call
    reader = hiredis.Reader()
    packed: bytes = hiredis.pack_command(("GET", KEY))  # type: ignore[arg-type]
    send, recv, feed, gets = sock.sendall, sock.recv, reader.feed, reader.gets
    n = 0
    try:
        while time.time_ns() < end_ns:
            send(packed)
            while gets() is False:
                feed(recv(65536))
            spin(iterations)
            n += 1
    finally:
        sock.close()
    return n


def measure(size: Size = FULL) -> dict[float, list[tuple[float, float]]]:
    """extra_us -> each round's (rps, CPU us per request), rounds alternating."""
    per_us = iterations_per_us()
    workdir = Path(tempfile.mkdtemp(prefix="gil-tax-"))
    proc, url = start_redis("gil-tax", workdir)
    found: dict[float, list[tuple[float, float]]] = {extra: [] for extra in size.extra_us}
    try:
        redis.Redis.from_url(url).set(KEY, b"x" * 90)
        for _ in range(size.rounds):
            for extra in size.extra_us:
                count = _count(url, size.threads, round(extra * per_us))
                found[extra].append(forked.measure_once(count, size.processes, size.seconds,
                                                        "benchmark 12"))
    finally:
        proc.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return found


def run(size: Size = FULL) -> dict[float, list[tuple[float, float]]]:
    found = measure(size)
    print(f"[12] the price of Python beside a request: benchmark 1's plain-socket floor with "
          f"plain Python spun after each reply, {size.processes} processes x {size.threads} "
          f"threads, {size.seconds:g} s per measurement, {size.rounds} rounds alternating")
    forked.print_rates({f"+{extra:g} us of Python a request: ": rounds
                        for extra, rounds in found.items()}, "+0 us of Python a request: ",
                       "    ", 0)
    return found


if __name__ == "__main__":
    run()
