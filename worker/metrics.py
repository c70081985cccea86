"""Prometheus metrics of one worker process, folded from the trial's rows as they are shipped.

The client threads never touch a metric: each batch the shipper drains from the recorders
(worker.shipper, about every second) is added to cumulative counters and histogram buckets
before it leaves for Parquet. So the live figures come from the same rows as Parquet, at most
one shipping interval behind, and the hot loop is the same with metrics on or off. Off unless
``STAMPEDE_METRICS_PORT`` is set (the embedded stack sets it only with ``--observe`` or
``--metrics-port``).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from model.services import METRICS_ADDR_ENV, METRICS_PORT_ENV
from model.wire import TrialSpec
from results.store.schema import NOT_REQUESTS, OUTCOMES, WRITE_OP

log = logging.getLogger(__name__)

PORT_ENV, ADDR_ENV = METRICS_PORT_ENV, METRICS_ADDR_ENV
# Seconds; about four per decade from 50 us (a local hit) to 20 s (a pile-up behind a dead lock).
LATENCY_BUCKETS = (0.00005, 0.0001, 0.0002, 0.0003, 0.0005, 0.00075, 0.001, 0.0015, 0.002, 0.003,
                   0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5,
                   0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0, 20.0)
STALE_AGE_BUCKETS = (0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0)
KEPT_TRIALS = 64  # finished trials whose series stay exported (then the oldest is dropped)
_LAT_EDGES = np.array([round(b * 1e9) for b in LATENCY_BUCKETS], np.int64)
_AGE_EDGES = np.array([round(b * 1e9) for b in STALE_AGE_BUCKETS], np.int64)
_TRIAL_LABELS = ["run_id", "trial", "worker", "strategy"]


class PoolStats(Protocol):
    def get_stats(self) -> dict[str, int]: ...


@dataclass
class TrialFeed:
    """What has been folded of one trial's rows on this worker so far."""

    labels: tuple[str, str, str, str]  # run_id, trial, worker, strategy
    ops: list[str]
    pool: PoolStats | None = None
    requests: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # [op, outcome]
    latency: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # [op, bucket]
    latency_sum: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float64))  # [op]
    origin_calls: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # [op]
    stale_age: np.ndarray = field(default_factory=lambda: np.zeros(len(_AGE_EDGES) + 1, np.int64))
    sums: dict[str, float] = field(default_factory=dict)  # seconds totals and plain counts
    errors: dict[str, int] = field(default_factory=dict)
    peak_inflight: int = 0  # among the rows folded since the last scrape

    def __post_init__(self) -> None:
        n = len(self.ops)
        self.requests = np.zeros((n, len(OUTCOMES)), np.int64)
        self.latency = np.zeros((n, len(_LAT_EDGES) + 1), np.int64)
        self.latency_sum = np.zeros(n, np.float64)
        self.origin_calls = np.zeros(n, np.int64)

    def add(self, col: np.ndarray, names: dict[int, str]) -> None:
        """Fold drained rows (``Recorder.drain``; ``names``: their error codes' texts)."""
        ops, n_ops = col["op_code"].astype(np.int64), len(self.ops)
        self.requests += np.bincount(ops * len(OUTCOMES) + col["outcome"],
                                     minlength=self.requests.size).reshape(self.requests.shape)
        lat = col["latency_ns"]
        buckets = np.searchsorted(_LAT_EDGES, lat, side="left")
        self.latency += np.bincount(ops * self.latency.shape[1] + buckets,
                                    minlength=self.latency.size).reshape(self.latency.shape)
        self.latency_sum += np.bincount(ops, weights=lat / 1e9, minlength=n_ops)
        called = col["origin_called"].astype(np.int64)
        self.origin_calls += np.bincount(ops, weights=called, minlength=n_ops).astype(np.int64)
        stale = col["outcome"] == OUTCOMES.index("stale")
        ages = np.searchsorted(_AGE_EDGES, col["stale_age_ns"][stale], side="left")
        self.stale_age += np.bincount(ages, minlength=self.stale_age.size)
        self._add_sum("stale_age_seconds", float(col["stale_age_ns"][stale].sum()) / 1e9)
        lock_wait = col["lock_wait_ns"]
        self._add_sum("lock_wait_seconds", float(lock_wait.sum()) / 1e9)
        self._add_sum("lock_waits", float(np.count_nonzero(lock_wait)))
        self._add_sum("pool_wait_seconds", float(col["pool_wait_ns"].sum()) / 1e9)
        self._add_sum("origin_seconds", float(col["origin_ns"].sum()) / 1e9)
        self._fold_errors(names, col["error_code"])
        self.peak_inflight = max(self.peak_inflight,
                                 peak_overlap(col["origin_start_ns"][called > 0],
                                              col["origin_ns"][called > 0]))

    def _add_sum(self, name: str, value: float) -> None:
        self.sums[name] = self.sums.get(name, 0.0) + value

    def _fold_errors(self, names: dict[int, str], codes: np.ndarray) -> None:
        codes = codes[codes >= 0]
        if not codes.size:
            return
        for code, count in zip(*np.unique(codes, return_counts=True), strict=True):
            name = names.get(int(code), "unknown")
            self.errors[name] = self.errors.get(name, 0) + int(count)

    def release(self) -> None:
        """The trial is over: its pool is closed (its counters stay exported)."""
        self.pool = None


def peak_overlap(starts: np.ndarray, durations: np.ndarray) -> int:
    """The most intervals open at one instant (an end before a start at the same instant)."""
    if not starts.size:
        return 0
    instants = np.concatenate([starts, starts + durations])
    steps = np.concatenate([np.ones(starts.size, np.int64), -np.ones(starts.size, np.int64)])
    order = np.lexsort((steps, instants))
    return int(np.cumsum(steps[order]).max())


class WorkerCollector(Collector):
    """Every trial this worker ran (the last ``KEPT_TRIALS``), folded at each scrape."""

    def __init__(self) -> None:
        self.worker = os.environ.get("HOSTNAME", "worker")
        self.enabled = False  # only a served collector follows trials: no cost when off
        self._lock = threading.Lock()
        self._feeds: dict[tuple[str, int], TrialFeed] = {}

    def watch(self, spec: TrialSpec, ops: Sequence[str], pool: PoolStats | None = None) -> None:
        """Export ``spec``'s trial (called before the clients start)."""
        if not self.enabled:
            return
        key = (spec.run_id, spec.trial)
        with self._lock:
            feed = self._feeds.get(key)
            if feed is None:
                labels = (spec.run_id, str(spec.trial), self.worker, spec.strategy_spec().label)
                feed = self._feeds[key] = TrialFeed(labels, list(ops))
                self._forget_old()
            feed.pool = pool or feed.pool

    def folder(self, spec: TrialSpec) -> Callable[[np.ndarray, dict[int, str]], None] | None:
        """What the shipper calls with each drain of ``spec``'s rows (None: metrics off)."""
        if not self.enabled:
            return None
        key = (spec.run_id, spec.trial)

        def fold(col: np.ndarray, names: dict[int, str]) -> None:
            with self._lock:
                feed = self._feeds.get(key)
                if feed is not None:
                    feed.add(col, names)
        return fold

    def finish(self, spec: TrialSpec) -> None:
        with self._lock:
            feed = self._feeds.get((spec.run_id, spec.trial))
            if feed is not None:
                feed.release()

    def _forget_old(self) -> None:
        while len(self._feeds) > KEPT_TRIALS:
            del self._feeds[next(iter(self._feeds))]

    def collect(self) -> Iterator[Any]:
        with self._lock:
            yield from families(list(self._feeds.values()))
            for feed in self._feeds.values():
                feed.peak_inflight = 0  # the gauge is per scrape


def families(feeds: Sequence[TrialFeed]) -> Iterator[Any]:
    """The metric families of ``feeds``; names follow Prometheus conventions (seconds, _total)."""
    requests = CounterMetricFamily("stampede_requests", "Requests answered, by endpoint and outcome.",
                                   labels=[*_TRIAL_LABELS, "endpoint", "outcome"])
    origin = CounterMetricFamily("stampede_origin_calls", "Origin queries run by this worker.",
                                 labels=[*_TRIAL_LABELS, "endpoint"])
    latency = HistogramMetricFamily("stampede_request_duration_seconds",
                                    "Request latency from the intended send, errors included.",
                                    labels=[*_TRIAL_LABELS, "endpoint"])
    errors = CounterMetricFamily("stampede_errors", "Failed requests by exception type.",
                                 labels=[*_TRIAL_LABELS, "type"])
    for feed in feeds:
        for o, op in enumerate(feed.ops):
            if not feed.requests[o].any() and op in (WRITE_OP, *NOT_REQUESTS):
                continue
            for k, outcome in enumerate(OUTCOMES):
                requests.add_metric([*feed.labels, op, outcome], float(feed.requests[o, k]))
            origin.add_metric([*feed.labels, op], float(feed.origin_calls[o]))
            latency.add_metric([*feed.labels, op], _cumulative(feed.latency[o], LATENCY_BUCKETS),
                               float(feed.latency_sum[o]))
        for name, count in feed.errors.items():
            errors.add_metric([*feed.labels, name], float(count))
    yield from (requests, origin, latency, errors)
    yield from _trial_sums(feeds)
    yield from _pool_gauges(feeds)


def _trial_sums(feeds: Sequence[TrialFeed]) -> Iterator[Any]:
    names = {"lock_wait_seconds": "Time clients spent waiting for another client's fill.",
             "lock_waits": "Requests that waited for a lock or a fill.",
             "pool_wait_seconds": "Time spent waiting for an origin pool connection.",
             "origin_seconds": "Time spent in origin queries.",
             "stale_answers": "Stale values served on purpose."}
    out = {n: CounterMetricFamily(f"stampede_{n}", h, labels=_TRIAL_LABELS) for n, h in names.items()}
    age = HistogramMetricFamily("stampede_stale_age_seconds", "Age of the stale values served.",
                                labels=_TRIAL_LABELS)
    stale_code = OUTCOMES.index("stale")
    for feed in feeds:
        for name, family in out.items():
            value = (float(feed.requests[:, stale_code].sum()) if name == "stale_answers"
                     else feed.sums.get(name, 0.0))
            family.add_metric(list(feed.labels), value)
        age.add_metric(list(feed.labels), _cumulative(feed.stale_age, STALE_AGE_BUCKETS),
                       feed.sums.get("stale_age_seconds", 0.0))
    yield from out.values()
    yield age


def _pool_gauges(feeds: Sequence[TrialFeed]) -> Iterator[Any]:
    inflight = GaugeMetricFamily("stampede_origin_inflight",
                                 "Origin connections in use now (queries in flight).",
                                 labels=_TRIAL_LABELS)
    peak = GaugeMetricFamily("stampede_origin_inflight_peak",
                             "Most origin queries in flight at once among the requests finished "
                             "since the last scrape.", labels=_TRIAL_LABELS)
    size = GaugeMetricFamily("stampede_origin_pool_size", "Origin connections of this worker.",
                             labels=_TRIAL_LABELS)
    waiting = GaugeMetricFamily("stampede_origin_pool_waiting",
                                "Requests waiting for an origin connection now.", labels=_TRIAL_LABELS)
    for feed in feeds:
        if feed.pool is None:
            continue
        stats = feed.pool.get_stats()
        size.add_metric(list(feed.labels), stats.get("pool_size", 0))
        inflight.add_metric(list(feed.labels), stats.get("pool_size", 0) - stats.get("pool_available", 0))
        waiting.add_metric(list(feed.labels), stats.get("requests_waiting", 0))
        peak.add_metric(list(feed.labels), feed.peak_inflight)
    yield from (inflight, peak, size, waiting)


def _cumulative(counts: np.ndarray, bounds: Sequence[float]) -> list[tuple[str, float]]:
    running = np.cumsum(counts)
    out = [(_le(b), float(running[i])) for i, b in enumerate(bounds)]
    return [*out, ("+Inf", float(running[-1]))]


def _le(bound: float) -> str:
    return repr(bound)  # 5e-05 and 0.0001 as Python writes them: what prometheus_client does


COLLECTOR = WorkerCollector()
REGISTRY = CollectorRegistry(auto_describe=False)
REGISTRY.register(COLLECTOR)


def metrics_port(environ: dict[str, str] | None = None) -> int | None:
    """The port from ``STAMPEDE_METRICS_PORT``; None when unset or empty; ValueError when bad."""
    raw = (os.environ if environ is None else environ).get(PORT_ENV, "").strip()
    if not raw:
        return None
    if not raw.isdigit() or not 0 < int(raw) < 65536:
        raise ValueError(f"{PORT_ENV}={raw!r} is not a TCP port (1-65535)")
    return int(raw)


def serve_from_env(worker: str) -> int | None:
    """Start the HTTP endpoint when a port is configured; label series with ``worker``."""
    COLLECTOR.worker = worker
    try:
        port = metrics_port()
    except ValueError as exc:
        log.error("metrics off: %s", exc)
        return None
    if port is None:
        return None
    addr = os.environ.get(ADDR_ENV, "0.0.0.0")  # opted in: containers are scraped from outside
    start_http_server(port, addr=addr, registry=REGISTRY)
    COLLECTOR.enabled = True
    log.info("metrics: http://%s:%d/metrics", addr, port)
    return port
