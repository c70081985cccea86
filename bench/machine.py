"""What the machine itself gives, beside benchmark 1: redis-benchmark's GET rate (benchmark 2),
bare processes waking at one instant (benchmark 5's floor), and the metrics scraper of the
metrics-on run."""

from __future__ import annotations

import contextlib
import multiprocessing
import re
import shutil
import subprocess
import threading
import time
import urllib.request
from typing import Any
from urllib.parse import urlsplit


class Scraper:
    """GET every worker's /metrics each second in a thread, as Prometheus would."""

    def __init__(self, ports: list[int]) -> None:
        self.ports, self.stop, self.scrapes = ports, threading.Event(), 0
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> Scraper:
        if self.ports:
            self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        if self.ports:
            self.thread.join(5)
            print(f"    (metrics scraped {self.scrapes} times)")

    def _loop(self) -> None:
        while not self.stop.wait(1.0):
            for port in self.ports:
                with contextlib.suppress(OSError):
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2).read()
                    self.scrapes += 1


def _sleep_until(target_ns: int, out: Any) -> None:
    while (left := target_ns - time.time_ns()) > 0:
        time.sleep(min(left / 1e9, 0.05))
    out.put(time.time_ns())


def bare_wakeup_spread_ms(processes: int) -> float:
    """The platform's floor for the start spread: bare processes sleeping to one instant."""
    spawn = multiprocessing.get_context("spawn")  # no fork of a process that runs threads
    queue: Any = spawn.Queue()
    target = time.time_ns() + 5 * 10**9
    procs = [spawn.Process(target=_sleep_until, args=(target, queue)) for _ in range(processes)]
    for p in procs:
        p.start()
    woke: list[int] = [int(queue.get(timeout=120)) for _ in procs]  # a loaded host spawns slowly
    for p in procs:
        p.join(5)
    return (max(woke) - min(woke)) / 1e6


def redis_benchmark_rps(url: str, connections: int, requests: int) -> float | None:
    """redis-benchmark's GET rate with the same number of connections (None when not installed)."""
    binary = shutil.which("redis-benchmark") or shutil.which("valkey-benchmark")
    if binary is None:
        return None
    parts = urlsplit(url)
    out = subprocess.run([binary, "-h", parts.hostname or "127.0.0.1", "-p", str(parts.port),
                          "-t", "get", "-c", str(connections), "-n", str(requests), "-q"],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    found = re.search(r"GET: ([\d.]+) requests per second", out)
    return float(found.group(1)) if found else None
