"""One trial inside one app process: the strategies built as a worker builds them, serving
HTTP requests on the server's threads, and the origin calls they make recorded as rows.

The process's request threads share the trial's strategies (a process-local single flight is
shared by them, as in a real service) and each owns its connections (the lean path). Every
request that reached the origin becomes an ``app`` row on the thread's own recorder; the
shipper sends them to the trial's stream like a worker's, numbered under this process's sender
number, so the coordinator writes them once and knows when they are complete.
"""

from __future__ import annotations

import functools
import threading
import time
from dataclasses import dataclass

import redis

from model.apptier import AppTrialSpec
from model.origins import origin_pool
from model.services import RedisPath, Services, redis_commands
from model.workload import Workload
from results.store import transport
from results.store.schema import APP_OP
from strategies import Outcome, Probe, close_strategy
from strategies.background import BackgroundWorker
from strategies.base import Servers, error_text
from worker.build import Built, build
from worker.floor import trial_cache
from worker.recorder import Recorder
from worker.shipper import Shipped, Shipper
from worker.trial import RefreshRows

ABANDON_S = 120  # after the trial's end, with no finish from the coordinator


class UnknownKey(LookupError):
    """A request for a key outside the trial's key set (a 404)."""


@dataclass(frozen=True)
class Answer:
    """What one request got: the strategy's outcome, its measurements, and the value served
    (the origin's bytes when the app served from the origin; else the version's digits:
    a strategy answers with its outcome, not the value)."""

    outcome: Outcome
    probe: Probe
    body: bytes
    error: str | None


@functools.lru_cache(maxsize=4)
def key_codes(workload: Workload) -> dict[str, tuple[int, int]]:
    """key -> (endpoint, key code), in the order worker.loop.Tables numbers them."""
    codes: dict[str, tuple[int, int]] = {}
    endpoints = workload.endpoints[:1] if workload.trace is not None else workload.endpoints
    for ep_index, ep in enumerate(endpoints):
        for name in ep.key_names():
            codes.setdefault(name, (ep_index, len(codes)))
    return codes


class AppTrial:
    """``serve`` from the request threads; ``finish`` once the coordinator says the clients
    are done (what is left of the rows, and the end marker, leave then)."""

    def __init__(self, spec: AppTrialSpec, sender: int, services: Services,
                 broker: redis.Redis) -> None:
        trial = spec.trial
        self.spec, self.sender = spec, sender
        self.front = bool(spec.front)
        self.ttl_s = trial.ttl_ms / 1000
        _, cache_url, self._cache = trial_cache(trial, services)
        self._locks = redis_commands(RedisPath(trial.redis_client), services.lock_url,
                                     trial.clients, trial.redis_max_connections)
        workload = trial.workload_spec()
        self._pool = origin_pool(services.origin_dsn, workload.origin, trial.pool_size)
        self.shipper = Shipper(broker, transport.rows_key(trial.run_id, trial.trial), sender,
                               trial.progress_interval_s)
        refreshes = RefreshRows()
        self._background = BackgroundWorker(refreshes)
        self.built: Built = build(trial, self._cache, self._locks, self._pool, self._background,
                                  Servers(cache_url, services.lock_url, trial.clients))
        refreshes.bind(self.built, -(sender + 2))
        self.shipper.watch(refreshes.recorders)
        self._app_op = self.built.ops.index(APP_OP)  # one op table for every recorder here
        self._codes = key_codes(workload)
        self._local = threading.local()
        self.shipper.start()

    def _recorder(self) -> tuple[Recorder, Probe]:
        """The calling thread's own recorder and probe (a recorder has one writer)."""
        mine: tuple[Recorder, Probe] | None = getattr(self._local, "mine", None)
        if mine is None:
            rec = Recorder(-(self.sender + 2), self.built.key_names, self.built.ops)
            self.shipper.watch([rec])
            mine = self._local.mine = (rec, Probe())
        return mine

    def serve(self, key: str, record: bool = True) -> Answer:
        """Answer one request for ``key``; an origin call it made becomes an ``app`` row (not
        for the coordinator's priming, ``record`` False). Failures are answers too (error)."""
        found = self._codes.get(key)
        if found is None:
            raise UnknownKey(key)
        endpoint, code = found
        rec, probe = self._recorder()
        probe.reset()
        error, body = None, b""
        t_start, t0 = time.time_ns(), time.perf_counter_ns()
        try:
            if self.front:  # an HTTP cache in front: every request that gets here is a call
                body = self.built.ctx.loaders[endpoint].load(key, probe)
                outcome = Outcome.FILLED
            else:
                outcome = self.built.ctx.fetchers[endpoint](key, probe)
                body = str(probe.version_served).encode()
        except Exception as exc:  # noqa: BLE001 - answered as a 500 and recorded as an error row
            outcome, error = Outcome.ERROR, error_text(exc)
        latency = time.perf_counter_ns() - t0
        if record and probe.origin_calls:
            rec.add(code, t_start, latency, outcome, probe, error, op=self._app_op,
                    stage=self.built.ctx.stages.at(t_start))
        return Answer(outcome, _copy(probe), body, error)

    def max_age_s(self) -> int:
        """The ``Cache-Control: max-age`` of an answer from the origin (whole seconds, as HTTP
        has them): the TTL, or with ``--expiry aligned`` the time left to the next boundary."""
        expiry = self.spec.trial.expiry_grid_ns
        if not expiry:
            return max(1, round(self.ttl_s))
        ttl_ns = self.spec.trial.ttl_ms * 1_000_000
        now = time.time_ns() - self.spec.trial.clock_offset_ns
        left = (expiry - now) % ttl_ns if now > expiry else expiry - now
        return max(1, round(left / 1e9))

    def abandoned(self) -> bool:
        """No finish came long after the trial's end: the coordinator is gone; finish anyway
        (its rows then wait on the stream, counted, for a coordinator that may come back)."""
        end_ns = self.spec.trial.end_ns + self.spec.trial.clock_offset_ns
        return time.time_ns() > end_ns + ABANDON_S * 10**9

    def finish(self) -> Shipped:
        """The clients are done: background work ends, the rest of the rows and the end
        marker leave, the connections close."""
        try:
            self._background.close()
        finally:
            shipped = self.shipper.finish()
            for strategy in self.built.strategies:
                close_strategy(strategy)
            _close(self._cache, self._locks, self._pool)
        return shipped


def _copy(probe: Probe) -> Probe:
    """A snapshot of the thread's probe (the probe itself is reused by the next request)."""
    copy = Probe()
    for name in Probe.__slots__:
        setattr(copy, name, getattr(probe, name))
    return copy


def _close(*things: object) -> None:
    for thing in things:
        close = getattr(thing, "close", None)
        if callable(close):
            close()

