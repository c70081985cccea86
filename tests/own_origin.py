"""Helpers of the your-own-stack tests: a database of the test's own (a table and a statement
it creates itself, never the seeded ones) on the session's PostgreSQL."""

from __future__ import annotations

import re

import psycopg

# About 5 ms per call: a herd of the clients that miss is visible, and cheap to run.
STATEMENT = "SELECT id, body, pg_sleep(0.005) FROM own_items WHERE id = %s"
KEYS_SQL = "SELECT id FROM own_items ORDER BY id LIMIT 1"


def own_database(server_dsn: str, name: str, extension: bool = True, rows: int = 200) -> str:
    """A fresh database ``name`` with a table ``own_items`` of ``rows`` rows; with
    pg_stat_statements created in it or not. Returns its DSN."""
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {name}")
    dsn = server_dsn.rsplit("/", 1)[0] + f"/{name}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        if extension:
            conn.execute("CREATE EXTENSION pg_stat_statements")
        conn.execute("CREATE TABLE own_items (id int PRIMARY KEY, body text NOT NULL)")
        conn.execute("INSERT INTO own_items SELECT i, repeat('x', 100) FROM generate_series(1, %s) i",
                     (rows,))
    return dsn


def tables(dsn: str) -> set[str]:
    """The tables of the database's public schema."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'").fetchall()
    return {str(r[0]) for r in rows}


def table_cell(table: str, strategy: str, column: str) -> str:
    """The cell of ``column`` in ``strategy``'s line of a printed summary table."""
    lines = table.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("strategy "))
    header = re.split(r"\s{2,}", lines[at].strip())
    row = next(line for line in lines[at + 2:] if line.split()[0] == strategy)
    return re.split(r"\s{2,}", row.strip())[header.index(column)]
