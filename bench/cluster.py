"""Benchmarks that need the whole embedded stack: generator efficiency (1), the Redis ceiling
(2) and start synchronization (5). One stack serves all three.

Benchmark 1 puts side by side, on the same 8 workers x 25 threads, the same key and value: the
all-hit trial through the product, the bare GET loops of the three client paths (pooled
redis-py, the lean path, a plain socket with hiredis: the Python floor) and Locust with 200
users at each process count. Its two ratios close ``make bench``."""

from __future__ import annotations

import contextlib
import multiprocessing
import re
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import redis
from celery.utils import worker_direct

import strategies
from bench.locust_bench import USER_CLASSES, LocustRun, best_locust
from coordinator import dispatch
from coordinator.config import LaunchConfig
from coordinator.console import Console
from coordinator.defaults import Timing
from coordinator.dispatch import client_app
from coordinator.origin import seed
from coordinator.plan import Schedule, TrialPlan, plan_trial
from coordinator.stack import EmbeddedStack
from coordinator.stack.processes import free_port
from coordinator.trial import TrialRunner
from model.wire import BASELINE
from model.workload import KeySet, Query, Workload, single
from results.store.rundir import RunWriter, read_trials
from worker.baseline import CLIENTS as LOOPS

WORKERS, CLIENTS, SECONDS, ROUNDS, SYNC_TRIALS = 8, 200, 5.0, 2, 20
HOT = "orders:0"


class Bench:
    """The stack, the Celery app and a TrialRunner writing into a scratch run directory."""

    def __init__(self, stack: EmbeddedStack) -> None:
        self.services = stack.services
        self.app = client_app(self.services.broker_url)
        self.console = Console(quiet=True)
        self.workers = dispatch.wait_for_workers(self.app, WORKERS, 60, lambda _: None)
        seed.seed_orders(self.services.origin_dsn, 20_000)
        # The key's TTL (600 s) outlives every trial: primed once per trial, every request hits.
        self.config = LaunchConfig(workers=WORKERS, clients=CLIENTS, strategies=(),
                                   ttl_s=1.0, seconds=SECONDS, repeat=1, out=Path("."),
                                   timing=Timing(lead_s=1.0, warmup_s=0.5),
                                   workload=Workload(single(Query.ORDERS, KeySet(), 600_000)))
        self.scratch = Path(tempfile.mkdtemp(prefix="stampede-bench-"))
        self.writer = RunWriter.create(self.scratch / "run")
        offsets = {w: {"offset_ns": 0, "uncertainty_ns": 0} for w in self.workers}
        self.runner = TrialRunner(self.config, self.services, self.app, self.writer, self.workers,
                                  offsets, self.console, span_s=3600.0)
        self.trial = 0

    def close(self) -> None:
        self.runner.close()
        self.app.close()
        shutil.rmtree(self.scratch, ignore_errors=True)

    def plan(self, seconds: float) -> TrialPlan:
        self.trial += 1
        schedule = Schedule(WORKERS, CLIENTS, 1.0, seconds, 0.5, (HOT,))
        return plan_trial(schedule, self.trial, strategies.parse("naive"), 1, time.time_ns(), 1.0)

    def all_hit_rps(self) -> float:
        self.runner.run(self.plan(SECONDS), of=0)
        row = read_trials(self.writer.root).to_pylist()[-1]
        assert row["origin_calls_total"] == 0 and row["errors"] == 0, row
        return float(row["rps"])

    def baseline_rps(self, client: str) -> float:
        """The bare GET loop of ``client`` (worker.baseline) on the same workers and threads."""
        start = time.time_ns() + 10**9
        shares = plan_shares(self.plan(SECONDS))
        results = [self.app.send_task(BASELINE, queue=worker_direct(w), args=[
            {"clients": n, "key": HOT, "start_ns": start, "seconds": SECONDS, "client": client}])
            for w, n in zip(self.workers, shares, strict=True)]
        total = sum(int(r.get(timeout=SECONDS + 60)["requests"]) for r in results)
        return total / SECONDS

    def start_spreads(self) -> list[float]:
        spreads = []
        for _ in range(SYNC_TRIALS):
            self.runner.run(self.plan(2.0), of=0)  # the shortest the plan allows (warm-up, one TTL, drain)
            spreads.append(float(read_trials(self.writer.root).to_pylist()[-1]["start_spread_ms"]))
        return spreads


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


def bare_wakeup_spread_ms(processes: int = WORKERS) -> float:
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


def plan_shares(plan: TrialPlan) -> list[int]:
    return [s.clients for s in plan.shares]


def redis_benchmark_rps(url: str, connections: int) -> float | None:
    """redis-benchmark's GET rate with the same number of connections (None when not installed)."""
    binary = shutil.which("redis-benchmark") or shutil.which("valkey-benchmark")
    if binary is None:
        return None
    parts = urlsplit(url)
    out = subprocess.run([binary, "-h", parts.hostname or "127.0.0.1", "-p", str(parts.port),
                          "-t", "get", "-c", str(connections), "-n", "300000", "-q"],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    found = re.search(r"GET: ([\d.]+) requests per second", out)
    return float(found.group(1)) if found else None


@dataclass(frozen=True)
class Figures:
    """Benchmark 1's medians (rps) and Locust's runs (None: Locust not installed)."""

    all_hit: float
    loops: dict[str, float]
    locust: list[LocustRun] | None

    @property
    def efficiency(self) -> float:
        """All-hit trial / plain-socket loop: the product's share of the Python floor."""
        return self.all_hit / self.loops["socket"]

    @property
    def vs_locust(self) -> float | None:
        """All-hit trial / Locust's fastest run (any user, any process count)."""
        best = self.best_locust()
        return self.all_hit / best.rps if best and best.rps else None

    def best_locust(self, user: str | None = None) -> LocustRun | None:
        """Locust's fastest run, of ``user`` only when given."""
        runs = [r for r in self.locust or [] if user in (None, r.user)]
        return max(runs, key=lambda r: r.rps, default=None)

    def vs_locust_line(self) -> str:
        """``vs Locust: Y x`` against its fastest run, then against each user's best."""
        best = self.best_locust()
        if best is None or not best.rps:
            return "vs Locust: n/a (no Locust run: see above)"
        users = [(u, self.best_locust(u)) for u in USER_CLASSES]
        each = "; ".join(f"{self.all_hit / r.rps:.1f} x against {u} ({r.processes} processes)"
                         for u, r in users if r is not None and r.rps)
        return f"vs Locust: {self.all_hit / best.rps:.1f} x against its fastest run ({each})"


def benchmark_1(bench: Bench, loops: tuple[str, ...]) -> Figures:
    """The all-hit trial and each bare loop in turn, ROUNDS times alternating; medians."""
    ours: list[float] = []
    bare: dict[str, list[float]] = {loop: [] for loop in loops}
    for _ in range(ROUNDS):
        ours.append(bench.all_hit_rps())
        for loop in loops:
            bare[loop].append(bench.baseline_rps(loop))
    size = len(redis.Redis.from_url(bench.services.cache_url).get(HOT) or b"")
    print(f"[1] all-hit trial (--redis-client lean), GET of one {size}-byte value: "
          f"{_rates(ours)} rps")
    names = {"pooled": "pooled redis-py (before issue 18)", "lean": "lean path, pinned",
             "socket": "plain socket + hiredis.Reader"}
    for loop in loops:
        print(f"    GET loop, {names[loop]}: {_rates(bare[loop])} rps")
    return Figures(statistics.median(ours), {k: statistics.median(v) for k, v in bare.items()},
                   None)


def _rates(values: list[float]) -> str:
    return ", ".join(f"{v:,.0f}" for v in values)


def locust_line(url: str) -> list[LocustRun] | None:
    """Locust, 200 users, at each process count, on the same Valkey and key."""
    tried = best_locust(url, HOT)
    if tried is None:
        print("    Locust not installed (pip install -e '.[bench]'): skipped")
        return None
    for failure in (t for t in tried if isinstance(t, str)):
        print(f"    Locust {failure}")
    runs = [t for t in tried if isinstance(t, LocustRun)]
    if not runs:
        return None
    for user in USER_CLASSES:
        mine = [r for r in runs if r.user == user]
        if not mine:
            continue
        best = max(mine, key=lambda r: r.rps)
        failed = sum(r.failures for r in mine)
        print(f"    Locust {metadata.version('locust')}, 200 {user} users: "
              + "; ".join(f"{r.processes} process{'es' if r.processes > 1 else ''} {r.rps:,.0f}"
                          for r in mine)
              + f" rps (best: {best.processes}){f'; {failed} failed requests' if failed else ''}")
    return runs


def run(metrics: bool = False) -> Figures:
    """Benchmarks 1, 2 and 5; with ``metrics``, the all-hit trial and the floor loop only, every
    worker serving metrics and scraped each second (as ``--observe`` does)."""
    print(f"cluster benchmarks{' with metrics on, scraped each second' if metrics else ''}: "
          f"{WORKERS} workers x {CLIENTS // WORKERS} clients, "
          f"{SECONDS:g} s per measurement, {ROUNDS} rounds alternating")
    ports = [free_port() for _ in range(WORKERS)] if metrics else None
    with EmbeddedStack(WORKERS, metrics_ports=ports) as stack, Scraper(ports or []):
        bench = Bench(stack)
        try:
            redis.Redis.from_url(stack.services.cache_url).flushdb()
            figures = benchmark_1(bench, ("socket",) if metrics else LOOPS)
            if metrics:
                return figures
            figures = Figures(figures.all_hit, figures.loops, locust_line(stack.services.cache_url))
            ceiling = redis_benchmark_rps(stack.services.cache_url, CLIENTS)
            if ceiling is None:
                print("[2] redis-benchmark not installed (apt-get install redis-tools): skipped")
            else:
                print(f"[2] redis-benchmark GET -c {CLIENTS}: {ceiling:,.0f} rps; ours is "
                      f"{figures.all_hit / ceiling:.2f} of it")
            spreads = bench.start_spreads()
            floor = statistics.median(bare_wakeup_spread_ms() for _ in range(5))
            print(f"[5] start spread over {WORKERS} workers, {SYNC_TRIALS} trials: median "
                  f"{statistics.median(spreads):.2f} ms, max {max(spreads):.2f} ms; {WORKERS} bare "
                  f"processes sleeping to one instant wake {floor:.2f} ms apart (median of 5)")
        finally:
            bench.close()
    return figures
