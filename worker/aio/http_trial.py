"""An HTTP trial on one worker with ``--client-driver asyncio``: each coroutine client GETs the
target (the app tier, an HTTP cache in front of it, a black-box service) on a keep-alive
connection of its own (worker.aio.http), in one event loop of the worker process.

Everything but the GET is the threads' HTTP trial's (worker.trial ``_over_http``): the floor
(sequential GETs of the target's floor path, before the start), the loop state (tables, stages,
arrivals), the rows, their meaning (worker.http_fetch) and their shipping while the trial runs.
The release, the closed and open loops and the follow-up are the asyncio strategy trial's
(worker.aio.trial ``drive``).
"""

from __future__ import annotations

import asyncio

from model.http.client import tls_context
from model.http.request import RequestBytes
from model.http.target import HttpTarget
from model.services import Services
from model.wire import TrialSpec
from worker import metrics
from worker.aio import run_loop
from worker.aio.http import AsyncHttpConnection, HttpDriver
from worker.aio.trial import drive, raise_fd_limit
from worker.build import AsyncBuilt, build_async_http
from worker.floor import http_floor_ns
from worker.recorder import Recorder
from worker.selfcheck import GeneratorLoad
from worker.shipper import Shipper
from worker.trial import Ran


class HttpClient:
    """One coroutine client of an HTTP trial: its recorder and its one connection, which every
    endpoint's requests share (an endpoint is a key set; the target is one)."""

    def __init__(self, rec: Recorder, conn: AsyncHttpConnection, endpoints: int) -> None:
        self.rec, self.conn = rec, conn
        self.drivers = [HttpDriver(conn)] * endpoints

    async def connect(self, gate: asyncio.Semaphore, _locks_too: bool) -> bool:
        """Open the connection before the start instant; False when it failed (the first GET
        connects again, its failure an error row)."""
        async with gate:
            try:
                await self.conn.connect()
            except OSError:  # refused, timed out, TLS (ssl.SSLError is an OSError)
                return False
        return True

    async def close(self) -> None:
        self.conn.close()


def over_http(spec: TrialSpec, services: Services, http: HttpTarget, shipper: Shipper) -> Ran:
    """The trial's coroutine clients against ``http``; what they recorded leaves, whatever
    failed."""
    raise_fd_limit(spec.clients)
    shipper.start()
    try:
        floor = http_floor_ns(spec, services, http)
        built = build_async_http(spec)
        metrics.COLLECTOR.watch(spec, built.ops)
        target, load = run_loop(_run_clients(spec, built, http, shipper))
    finally:
        shipped = shipper.finish()
        metrics.COLLECTOR.finish(spec)
    return Ran(floor, target, load, shipped)


async def _run_clients(spec: TrialSpec, built: AsyncBuilt, http: HttpTarget,
                       shipper: Shipper) -> tuple[int, GeneratorLoad]:
    requests = RequestBytes(http)  # built once per key for every client of the worker
    context = tls_context(http.verify) if http.scheme == "https" else None
    endpoints = len(spec.workload_spec().endpoints)
    recorders = [Recorder(spec.client_base + i, built.key_names, built.ops)
                 for i in range(spec.clients)]
    clients = [HttpClient(r, AsyncHttpConnection(http, requests, context), endpoints)
               for r in recorders]
    shipper.watch(recorders)
    return await drive(spec, built.ctx, clients, [None] * endpoints, [], locks_too=False)
