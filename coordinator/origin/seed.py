"""Seeding the origin's tables: ``orders`` (experiment 000) and ``products`` (experiment 003)."""

from __future__ import annotations

from coordinator.connect import pg_connect
from model.origin import CATEGORIES, DATA_DAYS, DATA_START, ensure_versions


class OriginNotReady(RuntimeError):
    """The origin database has no ``orders`` table to measure (and seeding was not asked)."""


def prepare_versions(dsn: str) -> None:
    """Every read joins ``key_writes``: make sure it exists in an origin seeded elsewhere."""
    with pg_connect(dsn, autocommit=True) as conn:
        ensure_versions(conn)


def require_orders(dsn: str) -> None:
    """Without --seed the existing table is measured: say clearly when there is none."""
    with pg_connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT to_regclass('orders') IS NOT NULL, "
                           "to_regclass('orders_created_at') IS NOT NULL").fetchone()
    if not row or not row[0]:
        raise OriginNotReady("the origin has no orders table: run once with --seed "
                             "(seeds --scale rows, then calibrates)")
    if not row[1]:
        raise OriginNotReady("orders has no index on created_at (orders_created_at): "
                             "run with --seed to recreate it")


def seed_orders(dsn: str, rows: int) -> None:
    """Create ``orders`` with ``rows`` random orders over one year and an index on the time."""
    with pg_connect(dsn, autocommit=True) as conn:
        ensure_versions(conn)
        conn.execute("DROP TABLE IF EXISTS orders")
        conn.execute(
            "CREATE TABLE orders (id bigserial PRIMARY KEY, customer_id int NOT NULL,"
            " amount numeric(10,2) NOT NULL, created_at timestamptz NOT NULL)"
        )
        conn.execute(
            "INSERT INTO orders (customer_id, amount, created_at)"
            " SELECT (random() * 100000)::int, (random() * 500)::numeric(10,2),"
            " %s::timestamptz + random() * make_interval(days => %s)"
            " FROM generate_series(1, %s)",
            (DATA_START, DATA_DAYS, rows),
        )
        conn.execute("CREATE INDEX orders_created_at ON orders (created_at)")
        conn.execute("VACUUM ANALYZE orders")


def seed_products(dsn: str, rows: int) -> None:
    """Create ``products`` (experiment 003): ``rows`` products over CATEGORIES categories.

    Only the primary key is indexed: the lookup by id is light, and the ranking (top 10 of a
    category by sales) must scan every row, which is what made it heavy in 003.
    """
    with pg_connect(dsn, autocommit=True) as conn:
        ensure_versions(conn)
        conn.execute("DROP TABLE IF EXISTS products")
        conn.execute(
            "CREATE TABLE products (id bigint PRIMARY KEY, category_id int NOT NULL,"
            " name text NOT NULL, price numeric(10,2) NOT NULL, sales int NOT NULL)"
        )
        conn.execute(
            "INSERT INTO products SELECT i, i %% %s, 'product ' || i,"
            " (random() * 500)::numeric(10,2), (random() * 100000)::int"
            " FROM generate_series(1, %s) AS i",
            (CATEGORIES, rows),
        )
        conn.execute("VACUUM ANALYZE products")


def count_rows(dsn: str, table: str) -> int:
    """Rows in ``table`` (0 when it does not exist): the size of a dataset seeded elsewhere."""
    with pg_connect(dsn, autocommit=True) as conn:
        if conn.execute("SELECT to_regclass(%s)", (table,)).fetchone() == (None,):
            return 0
        row = conn.execute(f"SELECT count(*) FROM {table}").fetchone()  # table: a constant
    return int(row[0]) if row else 0
