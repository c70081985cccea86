"""Origin faults on a real PostgreSQL: a blocking table lock, or pools run dry.

Each returns an ``OriginHold`` whose ``release`` lifts the fault; the injector calls it after the
fault's duration or at the trial's end, so no origin wait outlasts the trial.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from model.services import WORKER_APP


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
    """Run the workers' origin pools dry: drop their connections and refuse new ones.

    ``ALLOW_CONNECTIONS false`` on the database (superusers included), then every worker
    backend is terminated: pooled connections fail, the pools cannot reconnect, and requests
    wait for a pool connection until PoolTimeout, as when a real pool is exhausted. The one
    connection held here lets connections in again on release.
    """
    database = str(conninfo_to_dict(dsn).get("dbname") or "postgres")
    # A database cannot refuse connections to itself from inside: act from template1.
    conn = psycopg.connect(make_conninfo(dsn, dbname="template1"), connect_timeout=5,
                           autocommit=True, application_name="stampede-fault")
    conn.execute(sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS false").format(
        sql.Identifier(database)))
    row = conn.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                       " WHERE application_name = %s", (WORKER_APP,)).fetchone()

    def release() -> None:
        try:
            conn.execute(sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS true").format(
                sql.Identifier(database)))
        finally:
            conn.close()

    return OriginHold(f"refusing connections to {database}, dropped "
                      f"{int(row[0]) if row else 0} worker connections", release)
