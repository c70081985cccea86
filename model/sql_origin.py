"""The user's own statement as the origin (``--origin-sql``), through the worker's psycopg pool.

The statement runs as the user wrote it, the key its one parameter, so PostgreSQL's
pg_stat_statements counts it under its own query id (the coordinator's cross-check). Only with
``--write-sql`` does a read carry the key's version (``key_writes``, read in the same snapshot):
the consistency figures need it, and only then is that table created in the user's database.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool

from model.custom import CustomOrigin, raw_placeholders
from model.origin import (
    CONFIRM_SQL,
    NEXT_VERSION_SQL,
    VERSION_OF_SQL,
    Committed,
    encode_value,
    version_of,
)
from strategies import Probe
from strategies.version import stamp

_RAW_VERSION_OF = "SELECT coalesce(max(version), 0) FROM key_writes WHERE key = $1::text"


def versioned_read(sql: str) -> tuple[str, int]:
    """The read with the key's version as its first column, and how many times the key is
    passed (``$1`` is one parameter used twice; ``%s`` takes it twice)."""
    if raw_placeholders(sql):
        return f"SELECT ({_RAW_VERSION_OF}) AS version, q.* FROM ({sql}) AS q", 1
    return f"SELECT ({VERSION_OF_SQL}) AS version, q.* FROM ({sql}) AS q", 2


def executed_read(origin: CustomOrigin) -> str:
    """The statement the workers send for a read (what pg_stat_statements counts)."""
    return versioned_read(origin.read)[0] if origin.write else origin.read


def cursor(conn: psycopg.Connection[Any], raw: bool) -> psycopg.Cursor[Any]:
    """A cursor that takes ``$1`` (raw, the text untouched) or ``%s`` placeholders."""
    return psycopg.RawCursor(conn) if raw else conn.cursor()


class SqlLoader:
    """A ``Loader`` running the user's statement; pool wait and query time apart in the probe.

    An empty result is an answer (the key has no row: cached as such), not an error.
    """

    def __init__(self, pool: ConnectionPool, origin: CustomOrigin,
                 shaper: Callable[[bytes], bytes] = bytes, pool_timeout_s: float = 5.0) -> None:
        self._pool, self._shaper, self._pool_timeout_s = pool, shaper, pool_timeout_s
        self._raw = raw_placeholders(origin.read)
        self._versioned = bool(origin.write)
        self._sql, self._times = (versioned_read(origin.read) if self._versioned
                                  else (origin.read, 1))
        self._write = origin.write
        self._write_raw = raw_placeholders(origin.write) if origin.write else False

    def load(self, key: str, probe: Probe) -> bytes:
        asked = time.perf_counter_ns()
        with self._pool.connection(timeout=self._pool_timeout_s) as conn:
            got = time.perf_counter_ns()
            probe.pool_wait_ns += got - asked
            probe.origin_start_ns = time.time_ns()
            rows = cursor(conn, self._raw).execute(self._sql, (key,) * self._times).fetchall()
            probe.origin_ns += time.perf_counter_ns() - got
            probe.origin_calls += 1
        if not self._versioned:
            return stamp(0, self._encode(key, rows))
        version = int(rows[0][0]) if rows else self._version(key)
        return stamp(version, self._encode(key, [row[1:] for row in rows]))

    def _encode(self, key: str, rows: list[Any]) -> bytes:
        return encode_value(self._shaper, key, rows)

    def _version(self, key: str) -> int:
        """The version of a key whose read returned no row (then the wrapper returns none)."""
        return version_of(self._pool, self._pool_timeout_s, key)

    def write(self, key: str) -> Committed:
        """The user's ``--write-sql`` for ``key`` and the key's next version, in one transaction."""
        with self._pool.connection(timeout=self._pool_timeout_s) as conn, conn.transaction():
            cursor(conn, self._write_raw).execute(self._write, (key,))
            row = conn.execute(NEXT_VERSION_SQL, (key, key)).fetchone()
        assert row is not None  # an INSERT .. SELECT of an aggregate returns exactly one row
        return Committed(int(row[0]), time.time_ns())

    def confirm(self, key: str, version: int) -> None:
        with self._pool.connection(timeout=self._pool_timeout_s) as conn:
            conn.execute(CONFIRM_SQL, (key, version))
