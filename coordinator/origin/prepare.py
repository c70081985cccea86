"""Prepare the origin for a run: seed when asked, calibrate, record every endpoint's cost."""

from __future__ import annotations

import time
from typing import Any

import psycopg

from coordinator.blackbox import probe
from coordinator.config import LaunchConfig
from coordinator.console import Console
from coordinator.origin import calibrate, own, seed
from model.origin import OriginShape
from model.services import Services
from model.workload import Query

PRODUCT_QUERIES = (Query.PRODUCT, Query.RANKING)


def prepare_origin(config: LaunchConfig, services: Services, console: Console) -> dict[str, Any]:
    """Seed (when asked) and calibrate the origin query; its median is printed and recorded.
    The user's own origin is neither seeded nor calibrated (coordinator.origin.own); a black
    box's is its own (coordinator.blackbox.probe)."""
    if config.service is not None:
        return probe.describe(config, console.say)
    if not config.workload.origin.builtin:
        return own.prepare(config.workload, services, config.counter, console)
    dsn = services.origin_dsn
    seed.prepare_versions(dsn)
    if Query.ORDERS not in {ep.query for ep in config.workload.endpoints}:  # e.g. the shop mix
        return {"span_s": 3600.0, **endpoint_origin(config, dsn, 3600.0, console)}
    if not config.seed:
        seed.require_orders(dsn)
    if config.seed:
        t0 = time.monotonic()
        seed.seed_orders(dsn, config.scale)
        console.say(f"origin: seeded {config.scale:,} orders in {time.monotonic() - t0:.1f} s")
    cal = calibrate.calibrate(dsn, config.origin_target_ms)
    console.say(f"origin: range aggregate over {cal.span_s / 3600:.1f} h of orders, "
                f"median {cal.median_ms:.2f} ms on the hot key (target {config.origin_target_ms} ms)")
    return {"span_s": cal.span_s, "median_ms": cal.median_ms, "samples": cal.samples,
            "target_ms": config.origin_target_ms, "rows": config.scale if config.seed else None,
            **endpoint_origin(config, dsn, cal.span_s, console)}


def endpoint_origin(config: LaunchConfig, dsn: str, span_s: float,
                    console: Console) -> dict[str, Any]:
    """Seed ``products`` when an endpoint needs it, then record every endpoint's median cost."""
    queries = {ep.query for ep in config.workload.endpoints}
    products = 0
    if queries & set(PRODUCT_QUERIES):
        if config.seed:
            t0 = time.monotonic()
            seed.seed_products(dsn, config.scale)
            console.say(f"origin: seeded {config.scale:,} products in {time.monotonic() - t0:.1f} s")
        products = seed.count_rows(dsn, "products")
        if products == 0:
            raise psycopg.errors.UndefinedTable("the shop mix needs a seeded products table (--seed)")
    shape = OriginShape(span_s, products)
    medians = {}
    for ep in config.workload.endpoints:
        medians[ep.name] = round(calibrate.query_median_ms(dsn, ep.query, shape), 3)
        console.say(f"origin: endpoint {ep.name} ({ep.query.value}, weight {ep.weight:g}, "
                    f"ttl {ep.ttl_ms / 1000:g} s) median {medians[ep.name]:.2f} ms over 15 keys")
    return {"products": products, "endpoint_median_ms": medians}
