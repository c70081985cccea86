"""The user's own origin at the start of a run: nothing seeded, nothing tuned; what it is, its
keys, how its calls are checked and (a statement) its median cost are printed and recorded."""

from __future__ import annotations

import statistics
import time
from typing import Any

from coordinator.connect import pg_connect
from coordinator.console import Console
from coordinator.origin import seed
from coordinator.origin.user import Counter, origin_check
from model.custom import OriginKind, raw_placeholders
from model.services import Services, mask_url
from model.sql_origin import cursor
from model.workload import Workload

SAMPLES = 15


def statement_median_ms(dsn: str, sql: str, keys: list[str]) -> float:
    """Median wall time of the user's statement over ``keys`` (a read-only transaction each)."""
    times = []
    with pg_connect(dsn) as conn:
        for key in keys:
            with conn.transaction(force_rollback=True):
                conn.execute("SET TRANSACTION READ ONLY")
                t0 = time.perf_counter()
                cursor(conn, raw_placeholders(sql)).execute(sql, (key,)).fetchall()
                times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


def _count(keys: list[str]) -> str:
    return f"{len(keys):,} key" + ("" if len(keys) == 1 else "s")


def prepare(workload: Workload, services: Services, counter: Counter,
            console: Console) -> dict[str, Any]:
    """run.json's ``origin`` for the user's statement or service."""
    origin, ep = workload.origin, workload.endpoints[0]
    keys = ep.key_names()
    meta: dict[str, Any] = {"span_s": 3600.0, "products": 0, "kind": origin.kind.value,
                            "keys": len(keys), "key_set": ep.keys.label}
    if origin.kind is OriginKind.SQL:
        if origin.write:  # the one table stampede-lab adds, and only when writes were asked for
            seed.prepare_versions(services.origin_dsn)
            console.say("origin: --write-sql given: each key's version is kept in key_writes")
        median = statement_median_ms(services.origin_dsn, origin.read, keys[:SAMPLES])
        meta.update(statement=origin.read, write=origin.write, read_only=origin.read_only,
                    endpoint_median_ms={ep.name: round(median, 3)})
        console.say(f"origin: your statement, {_count(keys)} ({ep.keys.label}), median "
                    f"{median:.2f} ms over {_count(keys[:SAMPLES])}, "
                    f"{'read-only sessions' if origin.read_only else 'sessions that may write'}")
    else:
        meta.update(url=mask_url(origin.read), connect_timeout_s=origin.connect_timeout_s,
                    read_timeout_s=origin.read_timeout_s)
        console.say(f"origin: {mask_url(origin.read)}, {_count(keys)} ({ep.keys.label})")
    check = origin_check(workload, services, counter)
    meta["check"] = check.detail
    console.say(f"origin: calls checked against {check.detail}" if not check.unchecked
                else f"origin: calls unchecked: {check.unchecked}")
    return meta
