"""Benchmark 11 (issue 34, item 5): the asyncio client driver against the threaded one, on one
worker of the embedded stack: requests/s of the all-hit trial (naive, the key's TTL outlives the
trial, every request a hit) and the worker's memory per client, at the same client counts, then
10,000 asyncio clients alone (the threaded driver is not run there: 10,000 threads).

    python -m bench.aio_clients              # the full size (as make bench)
    python -m bench.aio_clients --tiny       # the tests' size

Memory per client: the worker process's peak RSS during the trial (sampled every 0.1 s from
/proc) less its RSS just before the trial's task was sent, over the clients; each measurement on
a stack of its own (a fresh worker) after one short unreported trial of its driver (the worker's
one-time growth is no client's, and no earlier trial's freed heap hides this one's). It holds the
clients (threads' stacks touched, coroutines, their connections and buffers) and the rows they
buffer until the shipper takes them (a few per client at a time), not the worker's own code.
Each trial's rows are checked as the launch checks them: none missing, no error, db calls match
(no origin call: 0 = 0). It asserts nothing else; the figures are printed.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import strategies
from bench.soak import rss_mb
from coordinator.config import LaunchConfig
from coordinator.console import Console
from coordinator.defaults import Timing
from coordinator.origin import seed
from coordinator.stack import EmbeddedStack
from coordinator.trials import dispatch
from coordinator.trials.dispatch import client_app
from coordinator.trials.plan import Schedule, plan_trial
from coordinator.trials.runner import TrialRunner
from model.services import ClientDriver
from model.workload import KeySet, Query, Workload, single
from results.store.rundir import RunWriter, read_trials

NAIVE = strategies.parse("naive")
HOT = "orders:0"
THREADS, ASYNCIO = ClientDriver.THREADS, ClientDriver.ASYNCIO


@dataclass(frozen=True)
class Size:
    """``FULL`` in ``make bench``, ``TINY`` in the tests."""

    pairs: tuple[int, ...] = (200, 1_000)  # client counts run on both drivers
    alone: int = 10_000  # asyncio clients on the one worker, alone
    seconds: float = 20.0  # of requests per trial (after a 0.5 s warm-up)
    alone_seconds: float = 60.0


FULL = Size()
TINY = Size(pairs=(20,), alone=200, seconds=2.0, alone_seconds=2.0)


@dataclass(frozen=True)
class Result:
    driver: ClientDriver
    clients: int
    rps: float
    requests: int
    per_client_kb: float
    peak_mb: float
    idle_mb: float
    lag_ms: float  # the worker's loop lag p99 (the event loop's, or the sampler thread's)
    cpu: float  # the worker process's CPU share
    late_ms: float  # the first request after the start instant

    def line(self) -> str:
        return (f"    {self.driver.value:>7}, {self.clients:>6,} clients: {self.rps:>9,.0f} rps "
                f"({self.requests:,} requests), memory {self.per_client_kb:,.1f} KB per client "
                f"(worker {self.idle_mb:,.0f} -> {self.peak_mb:,.0f} MB), loop lag p99 "
                f"{self.lag_ms:,.1f} ms, worker CPU {self.cpu:.2f}, released {self.late_ms:,.1f} ms late")


class Peak:
    """The largest RSS of ``pid`` until stopped, sampled every 0.1 s on a thread of its own."""

    def __init__(self, pid: int) -> None:
        self._pid, self.mb = pid, 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            self.mb = max(self.mb, rss_mb(self._pid) or 0.0)

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return self.mb


def trial(stack: EmbeddedStack, app: Any, worker: str, driver: ClientDriver, clients: int,
          seconds: float, number: int, scratch: Path) -> Result:
    """One all-hit trial of ``clients`` on ``driver``; its figures."""
    config = LaunchConfig(workers=1, clients=clients, strategies=(NAIVE,), ttl_s=1.0,
                          seconds=seconds + 0.5, repeat=1, out=scratch, client_driver=driver,
                          timing=Timing(lead_s=1.0, warmup_s=0.5),
                          workload=Workload(single(Query.ORDERS, KeySet(), 600_000)))
    writer = RunWriter.create(scratch / f"run{number}")
    runner = TrialRunner(config, stack.services, app, writer, [worker],
                         {worker: {"offset_ns": 0, "uncertainty_ns": 0}}, Console(quiet=True),
                         span_s=3600.0)
    pid = stack.workers[0].pid
    try:
        schedule = Schedule(1, clients, 1.0, seconds + 0.5, 0.5, (HOT,))
        lead = 1.0 + runner.setup_lead_s()
        plan = plan_trial(schedule, number, NAIVE, 1, time.time_ns(), lead)
        idle = rss_mb(pid) or 0.0
        peak = Peak(pid)
        try:
            runner.run(plan, of=0)
        finally:
            top = peak.stop()
    finally:
        runner.close()
    row = read_trials(writer.root).to_pylist()[-1]
    assert row["errors"] == 0 and row["batches_missing"] == 0 and row["rows_dropped"] == 0, row
    assert row["db_calls_match"] and row["client_driver"] == driver.value, row
    return Result(driver, clients, float(row["rps"]), int(row["requests"]),
                  max(0.0, top - idle) * 1000 / clients, top, idle,
                  float(row["max_loop_lag_ms"]), float(row["max_worker_cpu"]),
                  float(row["max_release_late_ms"]))


def measured(driver: ClientDriver, clients: int, seconds: float, warm_clients: int) -> Result:
    """One measurement on a stack of its own (a fresh worker process: the heap another trial
    grew and freed would hide this one's growth): a short unreported trial of ``warm_clients``
    on the same driver first (the worker's one-time growth: its tables, pyarrow's pools, the
    asyncio imports, is no client's), then ``clients`` for ``seconds``."""
    scratch = Path(tempfile.mkdtemp(prefix="stampede-bench-aio-"))
    try:
        with EmbeddedStack(1, clients=clients) as stack:
            app = client_app(stack.services.broker_url)
            try:
                worker = dispatch.wait_for_workers(app, 1, 60, lambda _: None)[0]
                seed.seed_orders(stack.services.origin_dsn, 20_000)
                trial(stack, app, worker, driver, warm_clients, 1.5, 1, scratch)
                return trial(stack, app, worker, driver, clients, seconds, 2, scratch)
            finally:
                app.close()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def run(size: Size = FULL) -> list[Result]:
    """Both drivers at each of ``size.pairs`` clients, then ``size.alone`` asyncio clients; the
    figures printed, one line each."""
    print(f"[11] asyncio clients vs client threads, one worker, all-hit trial (naive), "
          f"{size.seconds:g} s each ({size.alone_seconds:g} s for {size.alone:,} asyncio clients), "
          "each on a fresh worker after a short trial of its driver:", flush=True)
    warm = min(size.pairs)
    results: list[Result] = []
    for clients in size.pairs:
        for driver in (THREADS, ASYNCIO):
            results.append(measured(driver, clients, size.seconds, warm))
            print(results[-1].line(), flush=True)
    results.append(measured(ASYNCIO, size.alone, size.alone_seconds, warm))
    print(results[-1].line(), flush=True)
    for clients in size.pairs:
        by = {r.driver: r for r in results if r.clients == clients}
        ratio = by[ASYNCIO].per_client_kb / max(by[THREADS].per_client_kb, 1e-9)
        print(f"    {clients:,} clients, asyncio / threads: rps x{by[ASYNCIO].rps / by[THREADS].rps:.2f}, "
              f"memory per client x{ratio:.2f}", flush=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="the tests' size")
    run(TINY if parser.parse_args().tiny else FULL)


if __name__ == "__main__":
    main()
