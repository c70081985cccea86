"""The coordinator's connections, each bounded by one default: ``defaults.CONNECT_TIMEOUT_S``.

PostgreSQL (pg_stat_statements reads, seeding, calibration, the origin faults, the end-of-trial
check, provenance), Redis (provenance, the dashboard's expiry counter) and Celery's broker and
result store. A service that does not answer fails the connect after that many seconds.
The default is read at each call (tests shorten it).
"""

from __future__ import annotations

from typing import Any

import psycopg
import redis
from psycopg.rows import TupleRow

from coordinator import defaults


def connect_timeout_s() -> int:
    """Seconds any coordinator connection may take to connect."""
    return int(defaults.CONNECT_TIMEOUT_S)


def pg_connect(dsn: str, **kwargs: Any) -> psycopg.Connection[TupleRow]:
    """``psycopg.connect`` with the connect timeout."""
    return psycopg.connect(dsn, connect_timeout=connect_timeout_s(), **kwargs)


def redis_from_url(url: str, **kwargs: Any) -> redis.Redis:
    """``redis.Redis.from_url`` with the connect timeout."""
    return redis.Redis.from_url(url, socket_connect_timeout=connect_timeout_s(), **kwargs)


def celery_settings() -> dict[str, Any]:
    """Celery client settings: the broker's and the result store's connects bounded.

    Celery's own broker_connection_timeout does not reach the Redis transport's socket, and
    the Redis result store has no connect timeout at all: without these a broker that never
    answers hangs ``control.ping`` and ``send_task`` for good.
    """
    timeout = float(connect_timeout_s())
    return {"broker_connection_timeout": timeout, "redis_socket_connect_timeout": timeout,
            "broker_transport_options": {"socket_connect_timeout": timeout}}
