"""Probe each remote service before a run: an unreachable one is bad input, named, in seconds."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import psycopg
import redis

from model.services import Services, mask_url

PROBE_TIMEOUT_S = 3.0  # all four in parallel: reported well within 10 s


class Unreachable(RuntimeError):
    def __init__(self, option: str, message: str) -> None:
        super().__init__(message)
        self.option = option


def _redis(url: str) -> None:
    client = redis.Redis.from_url(url, socket_connect_timeout=PROBE_TIMEOUT_S,
                                  socket_timeout=PROBE_TIMEOUT_S, retry=None)
    try:
        client.ping()
    finally:
        client.close()


def _postgres(dsn: str) -> None:
    with psycopg.connect(dsn, connect_timeout=int(PROBE_TIMEOUT_S)) as conn:
        conn.execute("SELECT 1")


def _one(name: str, url: str) -> str | None:
    try:
        (_postgres if name == "origin_dsn" else _redis)(url)
    except (redis.RedisError, psycopg.Error, OSError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return f"{mask_url(url)} unreachable: {first[:160]}"
    return None


def probe(services: Services) -> None:
    """Raise Unreachable for the first service (in option order) that does not answer."""
    names = ["cache_url", "lock_url", "broker_url", "origin_dsn"]
    with ThreadPoolExecutor(len(names)) as pool:
        answers = list(pool.map(lambda n: _one(n, getattr(services, n)), names))
    for name, problem in zip(names, answers, strict=True):
        if problem:
            raise Unreachable("--" + name.replace("_", "-"), problem)
