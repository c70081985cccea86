"""``origin:exhaust`` on a real PostgreSQL holds a worker pool's connections: while it holds, no
request through the pool is answered or fails fast; the ones that took a connection hang in it,
the others wait for the pool (PoolTimeout), a new connection is refused, and the lift gives the
same connections back at once."""

from __future__ import annotations

import threading
import time

import psycopg
import pytest
from psycopg_pool import PoolTimeout

from coordinator.faults.origin_holds import exhaust_origin
from model.services import WORKER_APP, make_pool

POOL, CLIENTS = 2, 4
POOL_TIMEOUT_S = 1.0  # the workers wait 10 s; shorter here
HOLD_S = 1.8


def test_exhaust_holds_the_pools_connections(postgres_dsn: str) -> None:
    pool = make_pool(postgres_dsn, POOL, timeout_s=POOL_TIMEOUT_S)  # as a worker's (no check)
    with pool.connection() as conn:
        conn.execute("SELECT 1")
    outcome: dict[int, tuple[str, float]] = {}

    def request(i: int) -> None:
        t0 = time.monotonic()
        try:
            with pool.connection() as conn:
                conn.execute("SELECT 1")
            outcome[i] = ("answered", time.monotonic())
        except Exception as exc:  # noqa: BLE001 - asserted below
            outcome[i] = (type(exc).__name__, time.monotonic() - t0)

    hold = exhaust_origin(postgres_dsn)
    try:
        clients = [threading.Thread(target=request, args=(i,), daemon=True) for i in range(CLIENTS)]
        for client in clients:
            client.start()
        time.sleep(HOLD_S)
        during = dict(outcome)
        with pytest.raises(psycopg.OperationalError, match="not currently accepting connections"):
            psycopg.connect(postgres_dsn, connect_timeout=2, application_name=WORKER_APP)
    finally:
        lifted = time.monotonic()
        hold.release()
    for client in clients:
        client.join(10)
    try:
        t0 = time.monotonic()
        with pool.connection() as conn:
            conn.execute("SELECT 1")
        again_s = time.monotonic() - t0
    finally:
        pool.close()
    # While it held: nothing answered, nothing failed fast (no dropped connection); the
    # requests without a connection waited the pool's whole timeout.
    assert all(kind == PoolTimeout.__name__ and waited >= POOL_TIMEOUT_S - 0.05
               for kind, waited in during.values()), during
    assert len(during) == CLIENTS - POOL, during
    # The lift: the requests that held the pool's connections are answered at once.
    answered = [at - lifted for kind, at in outcome.values() if kind == "answered"]
    assert len(answered) == POOL and max(answered) < 1.0, outcome
    assert again_s < 0.5  # the pool has its connections back, no reconnect backoff
    assert f"holding {POOL} worker connections" in hold.detail, hold.detail
