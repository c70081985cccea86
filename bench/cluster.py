"""Benchmarks that need the whole embedded stack: generator efficiency (1), the Redis ceiling
(2) and start synchronization (5). One stack serves all three.

Benchmark 1 puts side by side, on the same 8 workers x 25 threads, the same key and value: the
all-hit trial through the product, the bare GET loops of the three client paths (pooled
redis-py, the lean path, a plain socket with hiredis: the Python floor) and Locust with 200
users at each process count. Its two ratios close ``make bench``."""

from __future__ import annotations

import shutil
import statistics
import tempfile
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

import redis
from celery.utils import worker_direct

import strategies
from bench import breakdown, cpu, locust_bench, machine
from bench.locust_bench import LocustRun
from bench.ratios import Figures, Round
from coordinator.config import LaunchConfig
from coordinator.console import Console
from coordinator.defaults import Timing
from coordinator.origin import seed
from coordinator.stack import EmbeddedStack
from coordinator.stack.processes import free_port
from coordinator.trials import dispatch
from coordinator.trials.dispatch import client_app
from coordinator.trials.plan import Schedule, TrialPlan, plan_trial
from coordinator.trials.runner import TrialRunner
from model.services import ClientDriver
from model.wire import BASELINE
from model.workload import KeySet, Query, Workload, single
from results.store.rundir import RunWriter, read_trials
from worker.baseline import CLIENTS as LOOPS

HOT = "orders:0"
# The trial's strategy, in the config too: the run's caches are opened per kind of server its
# strategies need (a config without it primed nothing: KeyError CacheServer.REDIS).
NAIVE = strategies.parse("naive")


@dataclass(frozen=True)
class Size:
    """How big benchmark 1, 2 and 5 run: ``FULL`` in ``make bench``, ``TINY`` in the tests."""

    workers: int = 8
    clients: int = 200
    seconds: float = 5.0  # per measurement (the all-hit trial: its requests' span)
    rounds: int = 5
    sync_trials: int = 20
    wakeups: int = 5  # bare-process wake-ups (benchmark 5's floor), the median of these
    locust_seconds: float = locust_bench.SECONDS
    locust_processes: tuple[int, ...] = locust_bench.PROCESS_COUNTS
    benchmark_requests: int = 300_000  # redis-benchmark -n
    stage_requests: int = 100_000  # bench.stages, per stage and repeat


FULL = Size()
TINY = Size(workers=2, clients=4, seconds=2.0, rounds=1, sync_trials=2, wakeups=1,
            locust_seconds=3.0, locust_processes=(1,), benchmark_requests=5_000,
            stage_requests=2_000)


class Bench:
    """The stack, the Celery app and a TrialRunner writing into a scratch run directory."""

    def __init__(self, stack: EmbeddedStack, size: Size) -> None:
        self.size = size
        self.services = stack.services
        self.app = client_app(self.services.broker_url)
        self.console = Console(quiet=True)
        self.workers = dispatch.wait_for_workers(self.app, size.workers, 60, lambda _: None)
        seed.seed_orders(self.services.origin_dsn, 20_000)
        # The key's TTL (600 s) outlives every trial: primed once per trial, every request hits.
        self.config = LaunchConfig(workers=size.workers, clients=size.clients, strategies=(NAIVE,),
                                   ttl_s=1.0, seconds=size.seconds, repeat=1, out=Path("."),
                                   timing=Timing(lead_s=1.0, warmup_s=0.5),
                                   workload=Workload(single(Query.ORDERS, KeySet(), 600_000)))
        self.scratch = Path(tempfile.mkdtemp(prefix="stampede-bench-"))
        self.writer = RunWriter.create(self.scratch / "run")
        offsets = {w: {"offset_ns": 0, "uncertainty_ns": 0} for w in self.workers}
        self.runner = TrialRunner(self.config, self.services, self.app, self.writer, self.workers,
                                  offsets, self.console, span_s=3600.0)
        self.groups = process_groups(stack)
        self.trial = 0

    def close(self) -> None:
        self.runner.close()
        self.app.close()
        shutil.rmtree(self.scratch, ignore_errors=True)

    def plan(self, seconds: float) -> TrialPlan:
        self.trial += 1
        size = self.size
        schedule = Schedule(size.workers, size.clients, 1.0, seconds, 0.5, (HOT,))
        return plan_trial(schedule, self.trial, NAIVE, 1, time.time_ns(), 1.0)

    def all_hit(self, driver: ClientDriver = ClientDriver.THREADS) -> tuple[float, dict[str, float]]:
        """The all-hit trial's rps (its window's) and CPU per request of each process group
        over its clients' span, less the warm-up; its clients threads or asyncio coroutines
        (``--client-driver``), the same trial otherwise. The runner's own config is back as
        it was after the trial: benchmark 5's trials run on threads."""
        plan = self.plan(self.size.seconds + 0.5)  # + the warm-up: 5 s of requests after it
        metered = Metered(self.groups, plan.window_start_ns, plan.end_ns)
        self.runner.config = replace(self.config, client_driver=driver)
        try:
            self.runner.run(plan, of=0)
        finally:
            self.runner.config = self.config
        row = read_trials(self.writer.root).to_pylist()[-1]
        assert row["origin_calls_total"] == 0 and row["errors"] == 0, row
        rps = float(row["rps"])
        return rps, metered.per_request_us(rps)

    def baseline(self, client: str) -> tuple[float, dict[str, float]]:
        """The bare GET loop of ``client`` (worker.baseline) on the same workers and threads:
        its rps and CPU per request of each process group over the loop's span."""
        seconds = self.size.seconds
        start = time.time_ns() + 10**9
        metered = Metered(self.groups, start, start + int(seconds * 1e9))
        shares = plan_shares(self.plan(seconds))
        results = [self.app.send_task(BASELINE, queue=worker_direct(w), args=[
            {"clients": n, "key": HOT, "start_ns": start, "seconds": seconds, "client": client}])
            for w, n in zip(self.workers, shares, strict=True)]
        rps = sum(int(r.get(timeout=seconds + 60)["requests"]) for r in results) / seconds
        return rps, metered.per_request_us(rps)

    def start_spreads(self) -> list[float]:
        spreads = []
        for _ in range(self.size.sync_trials):
            self.runner.run(self.plan(2.0), of=0)  # the shortest the plan allows (warm-up, one TTL, drain)
            spreads.append(float(read_trials(self.writer.root).to_pylist()[-1]["start_spread_ms"]))
        return spreads


def process_groups(stack: EmbeddedStack) -> dict[str, list[int]]:
    """The stack's processes by role (bench.cpu adds their descendants; the rest is ours)."""
    workers = [p.pid for p in stack.workers]
    groups = {"worker processes": workers, "their beaters": cpu.children(workers)}
    for name, label in (("cache", "cache server"), ("broker", "broker"),
                        ("lock-store", "lock store"), ("postgres", "postgres")):
        groups[label] = [stack.process(name).pid]
    return groups


class Metered:
    """CPU of each group between two wall-clock instants, read by a thread of its own."""

    def __init__(self, groups: dict[str, list[int]], start_ns: int, end_ns: int) -> None:
        self._groups, self._span = groups, (start_ns, end_ns)
        self._spent: cpu.Spent | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        start_ns, end_ns = self._span
        time.sleep(max(0.0, (start_ns - time.time_ns()) / 1e9))
        before, w0 = cpu.snapshot(self._groups), time.monotonic()
        time.sleep(max(0.0, (end_ns - time.time_ns()) / 1e9))
        self._spent = cpu.between(before, cpu.snapshot(self._groups), time.monotonic() - w0)

    def per_request_us(self, rps: float) -> dict[str, float]:
        self._thread.join()
        assert self._spent is not None
        return self._spent.per_request_us(rps * self._spent.wall_s)


def plan_shares(plan: TrialPlan) -> list[int]:
    return [s.clients for s in plan.shares]


LOOP_NAMES = {"pooled": "pooled redis-py (before issue 18)", "lean": "lean path, pinned",
              "socket": "plain socket + hiredis.Reader"}
ASYNCIO_HIT = "all-hit trial, asyncio clients"


def benchmark_1(bench: Bench, loops: tuple[str, ...], locust: LocustRun | None,
                asyncio: bool = False) -> Figures:
    """The all-hit trial (and with ``asyncio`` the same trial on asyncio clients), each bare
    loop and Locust's fastest configuration in turn, ``rounds`` times alternating; each round's
    ratios."""
    rounds = []
    for _ in range(bench.size.rounds):
        hit, hit_cpu = bench.all_hit()
        on_loop, loop_cpu = bench.all_hit(ClientDriver.ASYNCIO) if asyncio else (None, {})
        bare = {loop: bench.baseline(loop) for loop in loops}
        again = None if locust is None else locust_bench.run_again(
            bench.services.cache_url, HOT, locust, bench.size.locust_seconds, bench.size.clients)
        cpu = {"all-hit trial": hit_cpu, **({ASYNCIO_HIT: loop_cpu} if asyncio else {}),
               **{k: v[1] for k, v in bare.items()}}
        rounds.append(Round(hit, {k: v[0] for k, v in bare.items()}, again, cpu, on_loop))
    size = len(redis.Redis.from_url(bench.services.cache_url).get(HOT) or b"")
    print(f"[1] all-hit trial (--redis-client lean), GET of one {size}-byte value: "
          f"{_rates([r.all_hit for r in rounds])} rps")
    if asyncio:
        print(f"    the same trial, --client-driver asyncio (one event loop a worker): "
              f"{_rates([r.all_hit_asyncio or 0.0 for r in rounds])} rps")
    for loop in loops:
        print(f"    GET loop, {LOOP_NAMES[loop]}: {_rates([r.loops[loop] for r in rounds])} rps")
    if locust is not None:
        print(f"    Locust, {bench.size.clients} {locust.user} users, --processes {locust.processes} "
              f"(its fastest in the sweep above), in each round: "
              f"{_rates([r.locust or 0.0 for r in rounds])} rps")
    return Figures(rounds)


def _rates(values: list[float]) -> str:
    return ", ".join(f"{v:,.0f}" for v in values)


def print_cpu(figures: Figures, loops: tuple[str, ...]) -> None:
    print(f"[1] CPU per request, every process of the stack (/proc), median over the "
          f"{len(figures.rounds)} round{'s' if len(figures.rounds) > 1 else ''}:")
    measured = [n for n in ("all-hit trial", ASYNCIO_HIT, *loops)
                if any(n in r.cpu for r in figures.rounds)]
    for name in measured:
        print(f"    {LOOP_NAMES.get(name, name)}: {figures.cpu_line(name)}")


def run(metrics: bool = False, size: Size = FULL) -> Figures:
    """Benchmarks 1, 2 and 5; with ``metrics``, the all-hit trial and the floor loop only, every
    worker serving metrics and scraped each second (as ``--observe`` does)."""
    print(f"cluster benchmarks{' with metrics on, scraped each second' if metrics else ''}: "
          f"{size.workers} workers x {size.clients // size.workers} clients, "
          f"{size.seconds:g} s per measurement, {size.rounds} rounds alternating")
    ports = [free_port() for _ in range(size.workers)] if metrics else None
    with EmbeddedStack(size.workers, metrics_ports=ports) as stack, machine.Scraper(ports or []):
        bench = Bench(stack, size)
        try:
            redis.Redis.from_url(stack.services.cache_url).flushdb()
            if metrics:
                return benchmark_1(bench, ("socket",), None)
            sweep = locust_bench.sweep(stack.services.cache_url, HOT, size.locust_seconds,
                                      size.clients, size.locust_processes)
            loops = tuple(LOOPS)
            figures = benchmark_1(bench, loops, max(sweep or [], key=lambda r: r.rps, default=None),
                                  asyncio=True)
            figures = Figures(figures.rounds, sweep)
            print_cpu(figures, loops)
            breakdown.run(stack.services, figures, size.stage_requests, size.workers)
            others(bench, stack, figures)
        finally:
            bench.close()
    return figures


def others(bench: Bench, stack: EmbeddedStack, figures: Figures) -> None:
    """Benchmarks 2 (redis-benchmark's ceiling) and 5 (start synchronization)."""
    size = bench.size
    ceiling = machine.redis_benchmark_rps(stack.services.cache_url, size.clients, size.benchmark_requests)
    hit = statistics.median(r.all_hit for r in figures.rounds)
    if ceiling is None:
        print("[2] redis-benchmark not installed (apt-get install redis-tools): skipped")
    else:
        print(f"[2] redis-benchmark GET -c {size.clients}: {ceiling:,.0f} rps; ours is "
              f"{hit / ceiling:.2f} of it")
    spreads = bench.start_spreads()
    floor = statistics.median(machine.bare_wakeup_spread_ms(size.workers) for _ in range(size.wakeups))
    print(f"[5] start spread over {size.workers} workers, {size.sync_trials} trials: median "
          f"{statistics.median(spreads):.3f} ms, max {max(spreads):.3f} ms; {size.workers} bare "
          f"processes sleeping to one instant wake {floor * 1000:,.1f} us apart (median of "
          f"{size.wakeups})")
