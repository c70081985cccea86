"""The asyncio app's origin: the endpoints' built-in statements through psycopg's
``AsyncConnectionPool``, the same SQL text, parameters, version stamp and value encoding as the
threaded ``model.origin.EndpointLoader`` (so pg_stat_statements counts them by the same marks).

Not ``asyncio.to_thread`` over the threaded loader: that would bound the origin calls in flight
by the default executor's threads, not by the pool, and hide a pool wait behind a thread wait.
The user's own statement and an HTTP origin are not served here yet (one line, at trial build).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from psycopg_pool import AsyncConnectionPool

from model.custom import CustomOrigin, OriginKind
from model.origin import VERSION_OF_SQL, OriginShape, encode_value, sql_of, versioned
from model.services import WORKER_APP
from model.workload import Endpoint, Query
from strategies import Probe
from strategies.version import stamp

POOL_TIMEOUT_S = 5.0  # a connection's wait, as the threaded loader's: then an error row


class AsyncEndpointLoader:
    """``adapters.aio.base.AsyncLoader`` / ``strategies.drivers.aio.AsyncLoader`` for one
    endpoint: its query through the process's async pool, costs into the probe."""

    def __init__(self, pool: AsyncConnectionPool, query: Query, shape: OriginShape,
                 shaper: Callable[[bytes], bytes]) -> None:
        self._pool, self._query, self._shape, self._shaper = pool, query, shape, shaper
        self._sql = versioned(sql_of(query))

    async def load(self, key: str, probe: Probe) -> bytes:
        params = (key, *self._shape.params(self._query, key))
        asked = time.perf_counter_ns()
        async with self._pool.connection(timeout=POOL_TIMEOUT_S) as conn:
            got = time.perf_counter_ns()
            probe.pool_wait_ns += got - asked
            probe.origin_start_ns = time.time_ns()
            cursor = await conn.execute(self._sql, params)
            rows: list[Any] = await cursor.fetchall()
            probe.origin_ns += time.perf_counter_ns() - got
            probe.origin_calls += 1
            if not rows:
                if self._query is not Query.RANKING:
                    raise LookupError(f"origin has no row for {key!r}")
                found = await (await conn.execute(VERSION_OF_SQL, (key,))).fetchone()
                return stamp(int(found[0]) if found else 0, encode_value(self._shaper, key, []))
        return stamp(int(rows[0][0]), encode_value(self._shaper, key, [r[1:] for r in rows]))


async def open_pool(dsn: str, origin: CustomOrigin, size: int) -> AsyncConnectionPool:
    """A fixed-size async pool, opened and filled (as model.services.make_pool's)."""
    if origin.kind is not OriginKind.BUILTIN:
        raise ValueError(f"the asgi app tier serves the built-in origin only, not a "
                         f"{origin.kind.value} origin (use --app-kind wsgi)")
    pool = AsyncConnectionPool(dsn, min_size=size, max_size=size, open=False, timeout=10.0,
                               name="origin-async",
                               kwargs={"autocommit": True, "application_name": WORKER_APP,
                                       "connect_timeout": 5})
    await pool.open(wait=True, timeout=10.0)
    return pool


def loaders_for(endpoints: list[Endpoint], pool: AsyncConnectionPool, shape: OriginShape,
                shaper: Callable[[bytes], bytes]) -> list[AsyncEndpointLoader]:
    return [AsyncEndpointLoader(pool, ep.query, shape, shaper) for ep in endpoints]
