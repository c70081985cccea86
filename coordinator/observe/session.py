"""``--observe`` and ``--metrics-port`` for one launch: ports, exporters, Prometheus, the end.

Order matters at both ends: ports are chosen before the embedded stack starts its workers (each
gets its own in its environment), and Prometheus stops before the stack does, after one scrape
past the last trial, so the counters it keeps are the final ones.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import click

from coordinator.observe import board, dashboard
from coordinator.observe.exporters import start_exporters
from coordinator.observe.prometheus import INSTALL_HINT, Prometheus, PromQLError, Targets, find_binary
from coordinator.stack import EmbeddedStack
from coordinator.stack.processes import ManagedProcess, free_port
from model.services import METRICS_ADDR_ENV as ADDR_ENV
from model.services import Services


@dataclass(frozen=True)
class ObserveOptions:
    observe: bool = False  # start Prometheus (embedded stack only)
    metrics_port: int | None = None  # the coordinator's port; embedded workers take the next ones
    prometheus: str | None = None  # the binary, found when --observe was checked

    @property
    def serving(self) -> bool:
        return self.observe or self.metrics_port is not None


def check(observe: bool, metrics_port: int | None, workers: int, embedded: bool) -> ObserveOptions:
    """Bad combinations: one line naming the option, exit 2 (before anything starts)."""
    if observe and not embedded:
        raise click.BadParameter("starts Prometheus for the embedded stack only; with remote services "
                                 "use the compose profile 'observe' or k8s/components/observe",
                                 param_hint="--observe")
    if metrics_port is not None and embedded and metrics_port + workers > 65535:
        raise click.BadParameter(f"{metrics_port}: the {workers} workers take the next {workers} ports, "
                                 "past 65535", param_hint="--metrics-port")
    binary = find_binary() if observe else None
    if observe and binary is None:
        raise click.UsageError(INSTALL_HINT)
    return ObserveOptions(observe, metrics_port, binary)


class Observer:
    """What one launch serves and starts for watching; inert when nothing was asked."""

    def __init__(self, options: ObserveOptions, run_dir: Path, say: Callable[[str], None]) -> None:
        self.options, self.run_dir, self.say = options, run_dir, say
        self.port: int | None = None
        self.ports: list[int] = []

    def worker_ports(self, count: int) -> list[int] | None:
        """One port per embedded worker (None: metrics off); fixed before the workers start."""
        if not self.options.serving:
            return None
        base = self.options.metrics_port
        self.port = base if base is not None else free_port()
        self.ports = list(range(base + 1, base + 1 + count)) if base is not None else [
            free_port() for _ in range(count)]
        return self.ports

    @contextlib.contextmanager
    def running(self, services: Services, embedded: EmbeddedStack | None) -> Iterator[None]:
        """Serve the coordinator's metrics; with --observe, exporters and Prometheus too."""
        if not self.options.serving:
            yield
            return
        port = self.port if self.port is not None else self.options.metrics_port
        assert port is not None
        stop_board = board.serve(port, self.run_dir.name, os.environ.get(ADDR_ENV, "127.0.0.1"))
        redis_urls: dict[str, str] = {}
        if embedded is not None:
            redis_urls = {k: embedded.urls[k] for k in ("cache", "lock-store", "broker")}
            board.BOARD.workers_alive = lambda: sum(p.alive() for p in embedded.workers)
        self.say(f"metrics: coordinator on port {port}"
                 + (f", workers on {', '.join(map(str, self.ports))}" if self.ports else ""))
        with contextlib.ExitStack() as stack:
            stack.callback(stop_board)
            if self.options.observe and self.options.prometheus:
                stack.enter_context(self._prometheus(port, services, redis_urls))
            yield

    @contextlib.contextmanager
    def _prometheus(self, port: int, services: Services, redis_urls: dict[str, str]) -> Iterator[None]:
        home = self.run_dir / "prometheus"
        home.mkdir(exist_ok=True)
        targets = Targets()
        targets.add("stampede-coordinator", f"127.0.0.1:{port}")
        for worker_port in self.ports:
            targets.add("stampede-worker", f"127.0.0.1:{worker_port}")
        exporters: list[ManagedProcess] = []
        try:
            exporters = start_exporters(redis_urls, services.origin_dsn, home, targets, self.say)
            assert self.options.prometheus is not None
            prom = Prometheus(self.options.prometheus, home, targets)
            started = time.time()
            click.echo(f"prometheus: {prom.url}/graph (scraping {sum(map(len, targets.jobs.values()))} "
                       f"targets each second; data in {home / 'data'})", err=True)
            try:
                yield
            finally:
                self._finish(prom, started, home)
        finally:
            for proc in exporters:
                proc.stop()

    def _finish(self, prom: Prometheus, started: float, home: Path) -> None:
        """One scrape past the end, the panels' series for the report, then stop."""
        try:
            if not prom.wait_for_scrapes_after(time.time()):
                self.say("observe: not every target was scraped after the run (see its targets page)")
            dashboard.write_snapshot(prom, self.run_dir.name, started, time.time(), home / "panels.json")
        except (PromQLError, OSError) as exc:
            self.say(f"observe: the dashboard's panels could not be kept for the report: {exc}")
        finally:
            prom.stop()
