"""The origin side of a run's endpoints: seed their tables, measure each query's median cost."""

from __future__ import annotations

import time
from typing import Any

import psycopg

from coordinator import dataset
from coordinator.config import LaunchConfig
from coordinator.console import Console
from worker.queries import OriginShape
from worker.workload import Query

PRODUCT_QUERIES = (Query.PRODUCT, Query.RANKING)


def count_rows(dsn: str, table: str) -> int:
    """Rows in ``table`` (0 when it does not exist): the size of a dataset seeded elsewhere."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        if conn.execute("SELECT to_regclass(%s)", (table,)).fetchone() == (None,):
            return 0
        row = conn.execute(f"SELECT count(*) FROM {table}").fetchone()  # table: a constant
    return int(row[0]) if row else 0


def endpoint_origin(config: LaunchConfig, dsn: str, span_s: float,
                    console: Console) -> dict[str, Any]:
    """Seed ``products`` when an endpoint needs it, then record every endpoint's median cost."""
    queries = {ep.query for ep in config.workload.endpoints}
    products = 0
    if queries & set(PRODUCT_QUERIES):
        if config.seed:
            t0 = time.monotonic()
            dataset.seed_products(dsn, config.scale)
            console.say(f"origin: seeded {config.scale:,} products in {time.monotonic() - t0:.1f} s")
        products = count_rows(dsn, "products")
        if products == 0:
            raise psycopg.errors.UndefinedTable("the shop mix needs a seeded products table (--seed)")
    shape = OriginShape(span_s, products)
    medians = {}
    for ep in config.workload.endpoints:
        medians[ep.name] = round(dataset.query_median_ms(dsn, ep.query, shape), 3)
        console.say(f"origin: endpoint {ep.name} ({ep.query.value}, weight {ep.weight:g}, "
                    f"ttl {ep.ttl_ms / 1000:g} s) median {medians[ep.name]:.2f} ms over 15 keys")
    return {"products": products, "endpoint_median_ms": medians}
