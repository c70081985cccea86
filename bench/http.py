"""Benchmark 8 (issue 32): the HTTP clients against one static nginx endpoint, same run.

On the embedded stack's workers and one nginx started here (``bench.nginx_static``, loopback,
two worker processes, a 25-byte body), each measured in every round, the rounds alternating:
- the product's HTTP trial through the coordinator's ``TrialRunner`` (every request a row in
  Parquet; its rate is the trial's own window rps from trials.parquet), on client threads and
  again on asyncio clients (``--client-driver asyncio``: one event loop a worker);
- the plain-socket Python floor on the same workers and threads (worker.baseline's
  ``http-socket``: the GET built once, each response read to its known length, nothing else);
- Locust ``FastHttpUser`` with as many users as we have clients, at each process count (its best);
- wrk (``wrk -t2 -c<clients> -d<seconds>s``): the C floor for HTTP load.
It prints each rate and the ratios ours / floor (target >= 0.7), ours / Locust's best (target
>= 1.0) and ours / wrk, for each kind of client. A benchmark prints; it asserts nothing (its
tiny-size test does).
"""

from __future__ import annotations

import math
import re
import shutil
import statistics
import subprocess
import time
from dataclasses import dataclass, field, replace
from importlib import metadata
from pathlib import Path
from urllib.parse import quote

import pyarrow.dataset as ds
from celery.utils import worker_direct

import strategies
from bench.locust_bench import LocustRun, locust_binary, run_locust
from bench.nginx_static import BODY, StaticNginx, start_nginx
from coordinator.config import HttpSettings, LaunchConfig
from coordinator.console import Console
from coordinator.defaults import Timing
from coordinator.stack import EmbeddedStack
from coordinator.trials import dispatch
from coordinator.trials.plan import Schedule, plan_trial, split_clients
from coordinator.trials.runner import TrialRunner
from model.services import ClientDriver
from model.wire import BASELINE
from model.workload import KeySet, Query, Workload, single
from results.store.rundir import RunWriter, read_trials, requests_dataset
from worker.baseline import HTTP_SOCKET

HOT = "orders:0"  # the default workload's one key: /k/orders%3A0
LOCUSTFILE = Path(__file__).with_name("locustfile_http.py")
NGINX_WORKERS = 2


@dataclass(frozen=True)
class Size:
    """How big the benchmark runs: ``make bench``'s size, or the tests' tiny one."""

    workers: int = 8
    clients: int = 200
    seconds: float = 5.0
    rounds: int = 3
    ttl_s: float = 1.0  # the plan's periods (the window is whole ones); nothing expires here
    warmup_s: float = 0.5
    locust_processes: tuple[int, ...] = (1, 2, 8)
    locust_seconds: float = 10.0  # forked Locust workers report every 3 s: short runs lose counts


TINY = Size(workers=2, clients=4, seconds=1.0, rounds=1, ttl_s=0.25, warmup_s=0.25,
            locust_processes=(1,), locust_seconds=3.0)


@dataclass
class HttpFigures:
    """Every round's rates (requests/s); None where a tool is not installed."""

    ours: list[float] = field(default_factory=list)
    floor: list[float] = field(default_factory=list)
    ours_asyncio: list[float] = field(default_factory=list)  # the same trial, coroutine clients
    locust: list[LocustRun] | None = None
    wrk: list[float] | None = None

    def median(self, name: str) -> float | None:
        values = getattr(self, name)
        return statistics.median(values) if values else None

    def locust_best(self) -> LocustRun | None:
        return max(self.locust or [], key=lambda r: r.rps, default=None)

    def paired(self, name: str) -> list[float]:
        """Ours over ``name`` round by round (each pair measured minutes apart at most: on a
        shared machine the load moves between rounds more than between the two of a pair)."""
        return [o / v for o, v in zip(self.ours, getattr(self, name) or [], strict=False) if v]

    def ratios(self) -> dict[str, float | None]:
        """The medians of the paired ratios (floor, wrk); ours' median over Locust's best."""
        best, ours = self.locust_best(), self.median("ours") or math.nan
        floor, wrk = self.paired("floor"), self.paired("wrk")
        return {"floor": statistics.median(floor) if floor else None,
                "locust": ours / best.rps if best and best.rps else None,
                "wrk": statistics.median(wrk) if wrk else None}

    def on_asyncio(self) -> HttpFigures | None:
        """The same figures with the trial on asyncio clients as ours (None: not run)."""
        if not self.ours_asyncio:
            return None
        return HttpFigures(ours=self.ours_asyncio, floor=self.floor, locust=self.locust,
                           wrk=self.wrk)

    def ratio_line(self, label: str = "ours") -> str:
        r = self.ratios()

        def fmt(value: float | None, spec: str) -> str:
            return "n/a" if value is None else format(value, spec)

        each = ", ".join(f"{v:.2f}" for v in self.paired("floor"))
        return (f"[8] {label} / floor: {fmt(r['floor'], '.2f')} (median of the rounds' {each}; "
                f"target >= 0.7); {label} / Locust best: {fmt(r['locust'], '.2f')} x (target >= "
                f"1.0); {label} / wrk: {fmt(r['wrk'], '.2f')}")


class HttpBench:
    """The stack's workers, a TrialRunner whose every trial is an HTTP trial against nginx."""

    def __init__(self, stack: EmbeddedStack, nginx: StaticNginx, size: Size) -> None:
        self.size, self.services = size, stack.services
        self.target = HttpSettings().target(nginx.base + "/k/{key}")
        self.path = self.target.path_template.replace("{key}", quote(HOT, safe=""))
        self.app = dispatch.client_app(self.services.broker_url)
        self.workers = dispatch.wait_for_workers(self.app, size.workers, 60, lambda _: None)
        self.strategy = strategies.parse("naive")  # the plan's; no strategy of ours runs
        config = LaunchConfig(workers=size.workers, clients=size.clients, strategies=(self.strategy,),
                              ttl_s=size.ttl_s, seconds=size.seconds, repeat=1, out=Path("."),
                              timing=Timing(lead_s=1.0, warmup_s=size.warmup_s),
                              workload=Workload(single(Query.ORDERS, KeySet(), 600_000)),
                              http_target=self.target)
        self.scratch = Path(stack.workdir) / "bench-http"
        self.writer = RunWriter.create(self.scratch / "run")
        offsets = {w: {"offset_ns": 0, "uncertainty_ns": 0} for w in self.workers}
        self.runner = TrialRunner(config, self.services, self.app, self.writer, self.workers,
                                  offsets, Console(quiet=True), span_s=3600.0)
        self.trial = 0

    def close(self) -> None:
        self.runner.close()
        self.app.close()

    def trial_rps(self, driver: ClientDriver = ClientDriver.THREADS) -> float:
        """One HTTP trial on client threads or asyncio coroutines (``--client-driver``); its
        window rate as trials.parquet has it (every row in Parquet)."""
        self.trial += 1
        size = self.size
        schedule = Schedule(size.workers, size.clients, size.ttl_s, size.seconds, size.warmup_s,
                            (HOT,))
        plan = plan_trial(schedule, self.trial, self.strategy, 1, time.time_ns(), 1.0)
        config = self.runner.config
        self.runner.config = replace(config, client_driver=driver)
        try:
            self.runner.run(plan, of=0)
        finally:
            self.runner.config = config
        row = read_trials(self.writer.root).to_pylist()[-1]
        rows = requests_dataset(self.writer.root).to_table(
            columns=["strategy", "http_status", "http_bytes"], filter=ds.field("trial") == self.trial)
        statuses, labels = set(rows["http_status"].to_pylist()), set(rows["strategy"].to_pylist())
        if (row["errors"] or statuses != {200} or rows.num_rows != row["rows_written"]
                or labels != {self.target.url_template} or row["client_driver"] != driver.value):
            raise RuntimeError(f"the HTTP trial had {row['errors']} errors ({row['error_types']}),"
                               f" statuses {statuses}, {rows.num_rows} rows, labelled {labels}, on "
                               f"{row['client_driver']} clients")
        return float(row["rps"])

    def floor_rps(self) -> float:
        """worker.baseline's plain-socket loop on the same workers and threads."""
        seconds = self.size.seconds
        start = time.time_ns() + 10**9
        shares = [s.clients for s in split_clients(self.size.clients, self.size.workers)]
        results = [self.app.send_task(BASELINE, queue=worker_direct(w), args=[
            {"clients": n, "key": HOT, "start_ns": start, "seconds": seconds,
             "client": HTTP_SOCKET, "http": self.target.to_json()}])
            for w, n in zip(self.workers, shares, strict=True)]
        return sum(int(r.get(timeout=seconds + 60)["requests"]) for r in results) / seconds


def wrk_rps(url: str, connections: int, seconds: float) -> float | None:
    """wrk's rate with ``connections`` connections on two threads (None: not installed)."""
    binary = shutil.which("wrk")
    if binary is None:
        return None
    out = subprocess.run([binary, "-t2", f"-c{connections}", f"-d{max(1, round(seconds))}s", url],
                         capture_output=True, text=True, timeout=seconds + 60, check=True).stdout
    found = re.search(r"Requests/sec:\s+([\d.]+)", out)
    if found is None:
        raise RuntimeError(f"wrk printed no rate: {out[-300:]}")
    return float(found.group(1))


def locust_round(url: str, path: str, size: Size) -> list[LocustRun] | None:
    """Locust's FastHttpUser at each process count (None: Locust not installed); a run that
    fails is printed and left out."""
    binary = locust_binary()
    if binary is None:
        return None
    runs = []
    for n in size.locust_processes:
        try:
            runs.append(run_locust(binary, url, path, "StaticGet", n, size.locust_seconds,
                                   users=size.clients, locustfile=LOCUSTFILE))
        except (RuntimeError, subprocess.TimeoutExpired) as exc:
            print(f"    Locust at {n} processes failed: {exc}"[:300])
    return runs


def _rates(values: list[float]) -> str:
    return ", ".join(f"{v:,.0f}" for v in values)


def report(figures: HttpFigures, size: Size) -> None:
    print(f"    HTTP trial (every request a row in Parquet): {_rates(figures.ours)} rps")
    if figures.ours_asyncio:
        print(f"    the same trial on asyncio clients (--client-driver asyncio): "
              f"{_rates(figures.ours_asyncio)} rps")
    print(f"    plain-socket Python floor (GET built once, recv to the known length): "
          f"{_rates(figures.floor)} rps")
    if figures.locust is None:
        print("    Locust not installed (pip install -e '.[bench]'): skipped")
    else:
        by = {n: [r.rps for r in figures.locust if r.processes == n] for n in size.locust_processes}
        best = figures.locust_best()
        print(f"    Locust {metadata.version('locust')} FastHttpUser, {size.clients} users: "
              + "; ".join(f"{n} process{'es' if n > 1 else ''} {_rates(v)}" for n, v in by.items())
              + f" rps (best: {best.processes if best else '-'} processes)")
    if figures.wrk is None:
        print("    wrk not installed (apt-get install wrk): skipped")
    else:
        print(f"    wrk -t2 -c{size.clients} -d{max(1, round(size.seconds))}s: "
              f"{_rates(figures.wrk)} rps")
    print(figures.ratio_line())
    if (on_asyncio := figures.on_asyncio()) is not None:
        print(on_asyncio.ratio_line("ours on asyncio clients"))


def run(size: Size = Size()) -> HttpFigures:
    """Benchmark 8 at ``size``: print every round's rates and the ratios; return them."""
    print(f"[8] HTTP on one static nginx endpoint (nginx, {NGINX_WORKERS} worker processes, a "
          f"{len(BODY)}-byte body): {size.workers} workers x {size.clients // size.workers} "
          f"clients, {size.seconds:g} s per measurement, {size.rounds} rounds alternating")
    figures = HttpFigures()
    nginx = start_nginx(workers=NGINX_WORKERS)
    try:
        with EmbeddedStack(size.workers) as stack:
            bench = HttpBench(stack, nginx, size)
            try:
                for _ in range(size.rounds):
                    _round(bench, nginx, size, figures)
            finally:
                bench.close()
    finally:
        nginx.stop()
    report(figures, size)
    return figures


def _round(bench: HttpBench, nginx: StaticNginx, size: Size, figures: HttpFigures) -> None:
    figures.ours.append(bench.trial_rps())
    figures.ours_asyncio.append(bench.trial_rps(ClientDriver.ASYNCIO))
    figures.floor.append(bench.floor_rps())
    locust = locust_round(nginx.base, bench.path, size)
    if locust is not None:
        figures.locust = [*(figures.locust or []), *locust]
    wrk = wrk_rps(nginx.base + bench.path, size.clients, size.seconds)
    if wrk is not None:
        figures.wrk = [*(figures.wrk or []), wrk]


if __name__ == "__main__":
    run()
