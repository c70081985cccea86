"""Locust on the same job as benchmark 1: 200 users GET the hot key of the same Valkey.

Locust (a bench-only dependency: ``pip install -e '.[bench]'``, which ``make bench`` does) runs
headless from bench/locustfile.py, each of its two users (``USERS_CLASSES``) at each process
count, every user spawned at once; its rate
is its own count of requests over its own span (first start to last request), from its JSON
summary. Its best count is
the anchor of the closing ``vs Locust`` line (BRIEF section 6: the product should generate more
load per core than Locust).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

LOCUSTFILE = Path(__file__).with_name("locustfile.py")
USERS = 200
PROCESS_COUNTS = (1, 2, 8)  # 1: no --processes; else master + N forked workers
# Forked workers report every 3 s and the master quits 0.5 s after the time limit, so a short run
# can end with no report at all; the span ends at the last reported request, so the rate stays
# the rate of what was reported.
SECONDS = 10.0
# Locust's time limit is a gevent timer armed on a loop whose clock still reads the instant the
# loop was made, before Locust's imports: on a loaded machine (imports of 3 s and more) a run of
# a few seconds ended 80 ms after its users spawned, with no request. Such a run is made again,
# twice as long, up to RETRIES times (the rate is Locust's own count over its own span either way).
RETRIES = 2


# The usual Locust Redis user (a redis.Redis per user) and the fastest we found (one pinned
# connection per user): bench/locustfile.py.
USER_CLASSES = ("PooledGet", "PinnedGet")


@dataclass(frozen=True)
class LocustRun:
    user: str
    processes: int
    requests: int
    failures: int
    rps: float


def locust_binary() -> str | None:
    """The venv's ``locust`` (installed by the ``bench`` extra), else one on PATH."""
    beside = Path(sys.executable).with_name("locust")
    return str(beside) if beside.exists() else shutil.which("locust")


def master_json(text: str) -> list[dict[str, Any]]:
    """The master's summary among the JSON arrays in ``text``: each forked worker prints its own
    (empty) one too, before or after the master's."""
    decoder, found, at = json.JSONDecoder(), [], 0
    while (start := text.find("[", at)) >= 0:
        try:
            value, at = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            at = start + 1
            continue
        if isinstance(value, list) and all(isinstance(v, dict) for v in value):
            found.append(value)
    return max(found, key=lambda v: sum(int(s.get("num_requests", 0)) for s in v), default=[])


def summarise(stats: list[dict[str, Any]], user: str, processes: int) -> LocustRun:
    """Requests over Locust's own span (first start to last request) across its entries."""
    if not stats:
        raise RuntimeError("Locust reported no requests (spawning outlasted the run?)")
    requests = sum(int(s["num_requests"]) for s in stats)
    span_s = max(s["last_request_timestamp"] for s in stats) - min(s["start_time"] for s in stats)
    failures = sum(int(s["num_failures"]) for s in stats)
    return LocustRun(user, processes, requests, failures,
                     requests / span_s if span_s > 0 else 0.0)


def run_locust(binary: str, url: str, key: str, user: str, processes: int,
               seconds: float, users: int = USERS, locustfile: Path = LOCUSTFILE) -> LocustRun:
    """One headless Locust run, bounded in time; raise with its stderr when it fails. ``key``
    reaches the locustfile as STAMPEDE_BENCH_KEY (a Redis key) and STAMPEDE_BENCH_PATH."""
    # Every user at once (a spawn rate of 10 x the users: a ramp of 0.1 s inside the span), and
    # no --reset-stats: under load a forked worker that misses a heartbeat is sent its users
    # again, and each re-spawn reset the stats, down to none at the end of a short run.
    argv = [binary, "-f", str(locustfile), "--headless", "-u", str(users), "-r", str(users * 10),
            "-t", f"{seconds:g}s", "--host", url, "--only-summary", "--json",
            "--loglevel", "ERROR", "--stop-timeout", "2", user]
    if processes > 1:
        argv += ["--processes", str(processes)]
    for attempt in range(RETRIES + 1):
        timed = [*argv[:argv.index("-t") + 1], f"{seconds * 2**attempt:g}s",
                 *argv[argv.index("-t") + 2:]]
        done = subprocess.run(timed, capture_output=True, text=True,
                              timeout=seconds * 2**attempt + 90, check=False,
                              env={**os.environ, "STAMPEDE_BENCH_KEY": key,
                                   "STAMPEDE_BENCH_PATH": key})
        if done.returncode not in (0, 1):  # 1: some request failed (counted below)
            raise RuntimeError(f"locust exited {done.returncode}: {done.stderr[-800:]}")
        stats = master_json(done.stdout)
        if stats or attempt == RETRIES:
            break
    return summarise(stats, user, processes)


def best_locust(url: str, key: str, seconds: float = SECONDS, users: int = USERS,
                processes: tuple[int, ...] = PROCESS_COUNTS) -> list[LocustRun | str] | None:
    """Each Locust user at each process count: its run, or why it failed (None: Locust not
    installed)."""
    binary = locust_binary()
    if binary is None:
        return None
    runs: list[LocustRun | str] = []
    for user in USER_CLASSES:
        for n in processes:
            try:
                runs.append(run_locust(binary, url, key, user, n, seconds, users))
            except (RuntimeError, subprocess.TimeoutExpired) as exc:  # printed by the bench
                runs.append(f"{user} at {n} processes failed: {exc}")
    return runs


def run_again(url: str, key: str, best: LocustRun, seconds: float, users: int) -> float | None:
    """Locust's fastest configuration once more (each round of benchmark 1): its rate, or None
    with the failure printed."""
    binary = locust_binary()
    if binary is None:
        return None
    try:
        return run_locust(binary, url, key, best.user, best.processes, seconds, users).rps
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        print(f"    Locust {best.user} at {best.processes} processes failed: {exc}")
        return None


def sweep(url: str, key: str, seconds: float, users: int, processes: tuple[int, ...]
          ) -> list[LocustRun] | None:
    """Locust, the benchmark's users, each user class at each process count: printed."""
    tried = best_locust(url, key, seconds, users, processes)
    if tried is None:
        print("    Locust not installed (pip install -e '.[bench]'): skipped")
        return None
    for failure in (t for t in tried if isinstance(t, str)):
        print(f"    Locust {failure}")
    runs = [t for t in tried if isinstance(t, LocustRun)]
    for user in USER_CLASSES:
        mine = [r for r in runs if r.user == user]
        if not mine:
            continue
        best = max(mine, key=lambda r: r.rps)
        failed = sum(r.failures for r in mine)
        print(f"    Locust {metadata.version('locust')}, {users} {user} users: "
              + "; ".join(f"{r.processes} process{'es' if r.processes > 1 else ''} {r.rps:,.0f}"
                          for r in mine)
              + f" rps (best: {best.processes}){f'; {failed} failed requests' if failed else ''}")
    return runs or None
