"""Origin faults on a real PostgreSQL: a blocking table lock, or the pools' connections held.

Each returns an ``OriginHold`` whose ``release`` lifts the fault; the injector calls it after the
fault's duration or at the trial's end, so no origin wait outlasts the trial.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from coordinator.connect import pg_connect
from model.services import WORKER_APP


@dataclass(frozen=True)
class OriginHold:
    detail: str
    release: Callable[[], None]


def lock_orders(dsn: str) -> OriginHold:
    """``LOCK TABLE orders IN ACCESS EXCLUSIVE MODE`` in an open transaction: origin queries block."""
    conn = pg_connect(dsn, application_name="stampede-fault")
    conn.execute("LOCK TABLE orders IN ACCESS EXCLUSIVE MODE")

    def release() -> None:
        with contextlib.suppress(psycopg.Error):
            conn.rollback()
        conn.close()

    return OriginHold("holding ACCESS EXCLUSIVE lock on orders", release)


def exhaust_origin(dsn: str) -> OriginHold:
    """Hold every connection of the workers' origin pools, and refuse new ones.

    The PostgreSQL backend of each pooled worker connection is stopped (SIGSTOP; the embedded
    stack's server runs on this host): a request that takes one of the pool's connections hangs
    in its query, every other request waits for the pool until PoolTimeout, as when slow queries
    hold a whole pool (experiment 003). ``ALLOW_CONNECTIONS false`` on the database (superusers
    included) keeps a pool from opening others. Nothing is dropped, so the release (SIGCONT,
    then connections allowed again) hands the same connections back at once.
    """
    database = str(conninfo_to_dict(dsn).get("dbname") or "postgres")
    # A database cannot refuse connections to itself from inside: act from template1.
    conn = pg_connect(make_conninfo(dsn, dbname="template1"), autocommit=True,
                      application_name="stampede-fault")
    stopped: list[int] = []

    def release() -> None:
        try:
            for pid in stopped:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)
            conn.execute(sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS true").format(
                sql.Identifier(database)))
        finally:
            conn.close()

    try:
        conn.execute(sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS false").format(
            sql.Identifier(database)))
        rows = conn.execute("SELECT pid FROM pg_stat_activity WHERE application_name = %s"
                            " AND backend_type = 'client backend'", (WORKER_APP,)).fetchall()
        for (pid,) in rows:
            with contextlib.suppress(ProcessLookupError):  # a backend that just ended
                os.kill(int(pid), signal.SIGSTOP)
                stopped.append(int(pid))
    except BaseException:
        release()
        raise
    return OriginHold(f"refusing connections to {database}, holding {len(stopped)} worker "
                      "connections", release)
