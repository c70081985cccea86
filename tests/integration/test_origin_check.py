"""The origin check without --seed: a database with no orders table is a clear error."""

from __future__ import annotations

import psycopg
import pytest

from coordinator.origin.seed import OriginNotReady, require_orders


def test_measuring_an_origin_without_orders_is_a_clear_error(postgres_dsn: str) -> None:
    require_orders(postgres_dsn)  # the fixture seeded it
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("DROP DATABASE IF EXISTS empty_origin")
        conn.execute("CREATE DATABASE empty_origin")
    empty = postgres_dsn.rsplit("/", 1)[0] + "/empty_origin"
    with pytest.raises(OriginNotReady, match=r"no orders table.*--seed"):
        require_orders(empty)
