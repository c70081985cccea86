"""Origin faults on a real PostgreSQL: a blocking table lock, or every connection slot taken.

Each returns an ``OriginHold`` whose ``release`` lifts the fault; the injector calls it after the
fault's duration or at the trial's end, so no origin wait outlasts the trial.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psycopg

from worker.origin import WORKER_APP

MAX_HOLD_CONNECTIONS = 1000  # bound on the connections exhaust_origin opens


@dataclass(frozen=True)
class OriginHold:
    detail: str
    release: Callable[[], None]


def lock_orders(dsn: str) -> OriginHold:
    """``LOCK TABLE orders IN ACCESS EXCLUSIVE MODE`` in an open transaction: origin queries block."""
    conn = psycopg.connect(dsn, connect_timeout=5, application_name="stampede-fault")
    conn.execute("LOCK TABLE orders IN ACCESS EXCLUSIVE MODE")

    def release() -> None:
        with contextlib.suppress(psycopg.Error):
            conn.rollback()
        conn.close()

    return OriginHold("holding ACCESS EXCLUSIVE lock on orders", release)


def exhaust_origin(dsn: str) -> OriginHold:
    """Take every free connection slot, then drop the workers' pooled connections.

    The workers' pools lose their connections and cannot open new ones: requests wait for a
    pool connection and fail with PoolTimeout, as when a real pool is exhausted.
    """
    held: list[psycopg.Connection[Any]] = []

    def release() -> None:
        for conn in held:
            conn.close()

    try:
        while len(held) < MAX_HOLD_CONNECTIONS:
            held.append(psycopg.connect(dsn, connect_timeout=5, autocommit=True,
                                        application_name="stampede-fault"))
    except psycopg.OperationalError:
        pass  # no slot left: that is the point
    dropped = 0
    if held:
        row = held[-1].execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE application_name = %s", (WORKER_APP,)).fetchone()
        dropped = int(row[0]) if row else 0
    else:
        release()
        raise RuntimeError("no connection slot was free to hold")
    return OriginHold(f"holding {len(held)} connections, dropped {dropped} worker connections",
                      release)
