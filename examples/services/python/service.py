"""A read-through cache service: ``GET /items/{key}`` answers from Redis, or on a miss from
PostgreSQL (then caches the answer for ``TTL_S`` seconds). ``VARIANT=naive`` sends every request
that misses to the database; ``VARIANT=locked`` lets one of them fill (a ``SET NX`` lock, a second
look at the cache after taking it) while the others poll the cache. ``/metrics`` counts the
database queries in Prometheus text format. stampede-lab measures it from outside
(``--service-url``); it knows nothing of stampede-lab.

Run: ``PORT=8081 python service.py`` (uvicorn, one process) in this folder (README.md).
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import redis.asyncio as aioredis
import uvicorn
from fastapi import FastAPI, HTTPException, Response
from fastapi.responses import PlainTextResponse
from psycopg import AsyncRawCursor
from psycopg_pool import AsyncConnectionPool

VARIANT = os.environ.get("VARIANT", "naive")
TTL_S = int(os.environ.get("TTL_S", "60"))
DELAY_S = float(os.environ.get("ORIGIN_DELAY_MS", "20")) / 1000
POLL_S = float(os.environ.get("POLL_MS", "5")) / 1000
WAIT_S = float(os.environ.get("WAIT_MS", "2000")) / 1000
LOCK_MS = int(os.environ.get("LOCK_MS", "2000"))
# The origin statement, as pg_stat_statements shows it (--origin-statement).
STATEMENT = "SELECT id, body, pg_sleep($2) FROM items WHERE id = $1"
RELEASE = ("if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) "
           "end return 0")

if VARIANT not in ("naive", "locked"):
    raise SystemExit(f"VARIANT={VARIANT}: naive or locked")
if not os.environ.get("DATABASE_URL"):
    raise SystemExit("DATABASE_URL is not set (postgresql://USER@HOST:PORT/DB)")

cache = aioredis.Redis.from_url(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))
pool = AsyncConnectionPool(os.environ["DATABASE_URL"], min_size=1,
                           max_size=int(os.environ.get("POOL_SIZE", "10")), open=False,
                           kwargs={"autocommit": True})
COUNT = {"origin_calls": 0}  # the queries sent to the origin, for /metrics


async def origin(key: str) -> bytes:
    """The row of ``key`` from PostgreSQL, as the JSON the service answers with."""
    async with pool.connection() as conn:
        cursor = AsyncRawCursor(conn)
        await cursor.execute(STATEMENT, (key, DELAY_S))
        row = await cursor.fetchone()
    COUNT["origin_calls"] += 1
    return json.dumps({"id": row[0], "body": row[1]} if row else None).encode()


async def fill(key: str) -> bytes:
    value = await origin(key)
    await cache.set(f"item:{key}", value, ex=TTL_S)
    return value


async def locked(key: str) -> bytes:
    """One request fills under the lock (after a second look); the others poll the cache."""
    token = secrets.token_hex(8)
    lock = f"lock:item:{key}"
    if await cache.set(lock, token, nx=True, px=LOCK_MS):
        try:
            return await cache.get(f"item:{key}") or await fill(key)
        finally:
            await cache.eval(RELEASE, 1, lock, token)  # type: ignore[misc]
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        await asyncio.sleep(POLL_S)
        if value := await cache.get(f"item:{key}"):
            return bytes(value)
    raise HTTPException(503, f"waited {WAIT_S * 1000:g} ms for another request's fill of {key}")


async def read(key: str) -> bytes:
    cached = await cache.get(f"item:{key}")
    if cached:
        return bytes(cached)
    return await (locked(key) if VARIANT == "locked" else fill(key))


@asynccontextmanager
async def lifespan(_: FastAPI) -> AsyncIterator[None]:
    await pool.open(wait=True)
    yield
    await pool.close()
    await cache.aclose()


app = FastAPI(lifespan=lifespan)


@app.get("/items/{key}")
async def item(key: str) -> Response:
    value = await read(key)
    if value == b"null":
        raise HTTPException(404, "no such item")
    return Response(value, media_type="application/json")


@app.get("/metrics", response_class=PlainTextResponse)
async def metrics() -> str:
    return ("# HELP origin_calls_total Queries this service sent to its origin database.\n"
            "# TYPE origin_calls_total counter\n"
            f'origin_calls_total{{service="python",variant="{VARIANT}"}} {COUNT["origin_calls"]}\n')


if __name__ == "__main__":
    uvicorn.run(app, host=os.environ.get("HOST", "127.0.0.1"), port=int(os.environ.get("PORT", "8080")),
                access_log=False)
