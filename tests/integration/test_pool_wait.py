"""Pool wait on the real origin: a load that queues for the pool's one connection records the
time it queued as ``pool_wait_ns``, apart from its query time (``origin_ns``)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import psycopg

from model.origin import ORIGIN_MARK, EndpointLoader, OriginShape
from model.services import make_pool
from model.workload import Query
from strategies import Probe

HOLD_S = 0.15  # the first query waits this long on a table lock: a slow origin call
SLACK_NS = 5_000_000


def wait_until(condition: Callable[[], bool], what: str, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.005)


def test_second_load_waits_for_the_first_loads_whole_query(postgres_dsn: str) -> None:
    pool = make_pool(postgres_dsn, 1)
    loader = EndpointLoader(pool, Query.ORDERS, OriginShape(86400.0))  # the real orders query
    probes = [Probe(), Probe()]
    errors: list[BaseException] = []

    def client(i: int) -> None:
        try:
            loader.load(f"orders:{i}", probes[i])
        except BaseException as exc:  # noqa: BLE001 - asserted below
            errors.append(exc)

    clients = [threading.Thread(target=client, args=(i,)) for i in range(2)]
    blocker = psycopg.connect(postgres_dsn)  # outside the pool: holds a lock on orders
    monitor = psycopg.connect(postgres_dsn, autocommit=True)
    try:
        blocker.execute("LOCK TABLE orders IN ACCESS EXCLUSIVE MODE")
        # The test holds the pool's one connection until both loads queue for it, so both ask
        # before either gets it: whichever gets it second waits for the other's whole query.
        with pool.connection():
            for c in clients:
                c.start()
            wait_until(lambda: pool.get_stats().get("requests_waiting") == 2,
                       "both loads to queue for the pool")
        wait_until(lambda: monitor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
            " AND query LIKE %s", (f"%{ORIGIN_MARK}%",)).fetchone() == (1,),
            "the first load's query to block on the table lock")
        time.sleep(HOLD_S)
        blocker.commit()  # the first query completes; the second load gets the connection
        for c in clients:
            c.join(30)
    finally:
        blocker.close()
        monitor.close()
        pool.close()
    assert not errors, errors
    assert not any(c.is_alive() for c in clients)
    first, second = sorted(probes, key=lambda p: p.origin_start_ns)
    assert first.origin_calls == second.origin_calls == 1
    assert first.origin_ns >= HOLD_S * 1e9  # the query that held the connection was slow
    assert second.pool_wait_ns >= first.origin_ns - SLACK_NS, (
        f"second load's pool wait {second.pool_wait_ns / 1e6:.1f} ms is shorter than the "
        f"first load's query {first.origin_ns / 1e6:.1f} ms it queued behind")
