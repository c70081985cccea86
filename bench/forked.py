"""Worker-like processes forked to start at one instant, and their rates over a floor's.

Benchmarks 12 and 13 measure variants of the floor loop on 8 processes x 25 threads, rounds
alternating: each measurement forks the processes (nothing to import before the start instant),
each runs its threads from that instant to the end and sends back its requests and its CPU time.
"""

from __future__ import annotations

import multiprocessing as mp
import statistics
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from queue import Empty

# (process index, start instant, end instant; wall clock ns) -> requests that process made
Count = Callable[[int, int, int], int]


def _child(count: Count, index: int, start_ns: int, end_ns: int,
           out: mp.Queue[tuple[int, float, str]]) -> None:
    """Runs in the forked process: its count and CPU seconds, or the error that stopped it (the
    parent raises it at once instead of waiting out the timeout)."""
    cpu0 = time.process_time()
    try:
        n = count(index, start_ns, end_ns)
    except Exception as exc:  # sent to the parent, which raises it; re-raised here too
        out.put((0, 0.0, f"{type(exc).__name__}: {exc}"))
        raise
    out.put((n, time.process_time() - cpu0, ""))


def measure_once(count: Count, processes: int, seconds: float, name: str) -> tuple[float, float]:
    """(requests/s, CPU us per request over the processes) of ``processes`` running ``count``
    for ``seconds``; ``name`` says which benchmark in an error."""
    ctx = mp.get_context("fork")
    out: mp.Queue[tuple[int, float, str]] = ctx.Queue()
    start_ns = time.time_ns() + 500_000_000
    end_ns = start_ns + int(seconds * 1e9)
    procs = [ctx.Process(target=_child, args=(count, i, start_ns, end_ns, out))
             for i in range(processes)]
    for p in procs:
        p.start()
    results = []
    try:
        for _ in procs:
            results.append(out.get(timeout=seconds + 60))
            if error := results[-1][2]:
                raise RuntimeError(f"a {name} process failed: {error}")
    except Empty:
        raise RuntimeError(f"a {name} process sent no count within a minute of its end "
                           "(its error is above)") from None
    finally:
        for p in procs:
            p.join(timeout=seconds + 10)
    requests = sum(n for n, _, _ in results)
    if requests == 0:
        raise RuntimeError(f"{name} made no request")
    return requests / seconds, sum(cpu for _, cpu, _ in results) / requests * 1e6


def in_threads(threads: int, loop: Callable[[int], int], start_ns: int, end_ns: int) -> int:
    """``threads`` threads each sleeping to ``start_ns``, then ``loop(end_ns)``; their total."""
    counts = [0] * threads

    def client(i: int) -> None:
        time.sleep(max(0.0, (start_ns - time.time_ns()) / 1e9))
        counts[i] = loop(end_ns)
    join([threading.Thread(target=client, args=(i,)) for i in range(threads)])
    return sum(counts)


def join(threads: Sequence[threading.Thread]) -> None:
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def print_rates(rows: Mapping[str, Sequence[tuple[float, float]]], base: str, indent: str,
                width: int, cpu_of: str = "CPU") -> None:
    """One line a row: each round's rate, the median of the rounds' ratios over ``base``'s
    rate in the same round, and the median CPU per request."""
    floor = [rps for rps, _ in rows[base]]
    for label, rounds in rows.items():
        rates = ", ".join(f"{rps:,.0f}" for rps, _ in rounds)
        ratio = statistics.median(rps / b for (rps, _), b in zip(rounds, floor, strict=True))
        cpu = statistics.median(c for _, c in rounds)
        print(f"{indent}{label:<{width}}{rates} rps; {ratio:.2f} of the floor (median of the "
              f"rounds' ratios), {cpu:.1f} us of {cpu_of} a request")
