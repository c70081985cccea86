"""Consistency under writes on real Redis and PostgreSQL: the stale-set race, made likely with a
slow origin statement (``pg_sleep`` in the test only), seen by the rows and by the servers."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pyarrow as pa
import pyarrow.compute as pc
import pytest
import redis
from psycopg_pool import ConnectionPool

from coordinator.consistency import end_check, lifetime_s, written_keys
from model.origin import ORIGIN_SQL, EndpointLoader, OriginShape, ensure_versions
from model.services import Services, make_pool
from model.workload import KeySet, Query, Workload, single
from results.figures.consistency import consistency_figures
from results.store.schema import WRITE_OP
from strategies import Deps, Outcome, Probe, Strategy, StrategySpec, parse
from strategies.commands import Commands
from tests.helpers import sent_rows, trial_spec
from tests.strategy_helpers import MakeCommands
from worker.recorder import Recorder
from worker.trial import run_trial

KEY = "orders:3"
TTL_MS = 1500
# The reader's origin statement takes its snapshot, then waits on this advisory lock, which the
# test holds until the write has committed and invalidated: the race happens in every run, not
# only when a fixed sleep outlasts a loaded machine's commit (a 300 ms pg_sleep once returned
# 130 ms before a CI run's write committed).
GATE = 4_242
SLOW_SQL = ORIGIN_SQL.replace("FROM orders WHERE",
                              f"FROM orders, pg_advisory_xact_lock_shared({GATE}) WHERE")
HELD_AFTER_WRITE_S = 0.05  # the slow statement returns this long after the commit: the servers'
# proof of a stale set needs the old value to outlive the newer commit by more than PTTL's 1 ms
WAITING = ("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = %s"
           " AND NOT granted")


@pytest.fixture
def pool(postgres_dsn: str) -> Iterator[ConnectionPool]:
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        ensure_versions(conn)
    pool = make_pool(postgres_dsn, 4)
    yield pool
    pool.close()


def race(spec: StrategySpec, cache: Commands, locks: Commands,
         pool: ConnectionPool) -> tuple[pa.Table, Strategy]:
    """One reader misses and loads slowly; a write commits and invalidates meanwhile.

    Both go through the real row path (``Recorder``), as a worker records them."""
    shape = OriginShape(3600.0)
    reader_deps = Deps(cache, locks, EndpointLoader(pool, Query.ORDERS, shape, sql=SLOW_SQL), TTL_MS)
    writer_loader = EndpointLoader(pool, Query.ORDERS, shape)
    strategy = spec.build(reader_deps)
    rows = Recorder(0, [KEY], ["orders", WRITE_OP])
    writes = Recorder(-1, [KEY], ["orders", WRITE_OP])

    def read() -> None:
        probe, t0 = Probe(), time.time_ns()
        outcome = strategy.fetch(KEY, probe)
        rows.add(0, t0, time.time_ns() - t0, outcome, probe, None)

    reader = threading.Thread(target=read)
    with pool.connection() as gate:
        gate.execute("SELECT pg_advisory_lock(%s)", (GATE,))
        reader.start()
        _wait_for_the_reader_at(gate)
        probe, t0 = Probe(), time.time_ns()
        committed = writer_loader.write(KEY)
        strategy.on_write(KEY, probe)
        probe.version_served = committed.version
        writer_loader.confirm(KEY, committed.version)
        writes.add(0, t0, time.time_ns() - t0, Outcome.FILLED, probe, None, op=1,
                   commit_ns=committed.commit_ns)
        time.sleep(HELD_AFTER_WRITE_S)
        gate.execute("SELECT pg_advisory_unlock(%s)", (GATE,))
    reader.join(10)
    table = pa.Table.from_batches([rows.to_batch(), writes.to_batch()])
    return table.append_column("in_window", pa.array([True] * table.num_rows)), strategy


def _wait_for_the_reader_at(gate: psycopg.Connection[Any], timeout_s: float = 10.0) -> None:
    """Until the reader's statement (its snapshot taken) waits on the gate."""
    deadline = time.monotonic() + timeout_s
    while (row := gate.execute(WAITING, (GATE,)).fetchone()) is None or row[0] == 0:
        assert time.monotonic() < deadline, "the reader's origin statement never reached the gate"
        time.sleep(0.005)


def sides(rows: pa.Table) -> tuple[dict[str, Any], dict[str, Any]]:
    """The reader's row and the writer's row of a race."""
    return (rows.filter(pc.equal(rows["client"], 0)).to_pylist()[0],
            rows.filter(pc.equal(rows["client"], -1)).to_pylist()[0])


def cached_check(strategy: Strategy, cache: redis.Redis, dsn: str, spec: StrategySpec,
                 rows: pa.Table) -> tuple[int, int]:
    check = end_check(written_keys(rows), {KEY: strategy.cached_version}, cache.pttl, dsn,
                      {KEY: lifetime_s(spec, TTL_MS)})
    return check.behind, check.stale_sets


def test_lock_dc_writes_the_old_version_after_the_invalidation(
        cache: redis.Redis, locks: redis.Redis, pool: ConnectionPool, postgres_dsn: str,
        commands: MakeCommands) -> None:
    spec = parse("lock-dc")
    rows, strategy = race(spec, commands(cache), commands(locks), pool)
    read, write = sides(rows)
    assert read["outcome"] == "filled" and write["error"] is None
    assert read["version_served"] == write["version_served"] - 1  # its snapshot predates the write
    assert read["version_set"] == read["version_served"] and read["set_ns"] > write["commit_ns"]
    assert consistency_figures(rows)["stale_sets"] == 1
    # the servers agree: the old version is still cached one lifetime after the newer commit
    assert cached_check(strategy, cache, postgres_dsn, spec, rows) == (1, 1)


def test_lease_refuses_the_set_computed_before_the_invalidation(
        cache: redis.Redis, locks: redis.Redis, pool: ConnectionPool, postgres_dsn: str,
        commands: MakeCommands) -> None:
    spec = parse("lease")
    rows, strategy = race(spec, commands(cache), commands(locks), pool)
    read, write = sides(rows)
    assert read["outcome"] == "filled"
    assert read["version_served"] == write["version_served"] - 1  # the same race ...
    assert read["version_set"] == -1  # ... but its set was refused
    assert consistency_figures(rows)["stale_sets"] == 0
    assert cache.get(KEY) is None
    assert cached_check(strategy, cache, postgres_dsn, spec, rows) == (0, 0)


def test_update_writes_the_committed_version_through(
        cache: redis.Redis, locks: redis.Redis, pool: ConnectionPool,
        commands: MakeCommands) -> None:
    loader = EndpointLoader(pool, Query.ORDERS, OriginShape(3600.0))
    deps = Deps(commands(cache), commands(locks), loader, TTL_MS)
    strategy = parse("lock-dc:on_write=update").build(deps)
    committed = loader.write(KEY)
    probe = Probe()
    strategy.on_write(KEY, probe)
    assert probe.origin_calls == 1 and probe.version_set == committed.version
    assert strategy.cached_version(KEY) == committed.version




def test_rows_record_the_versions_the_origin_returned(
        redis_server: Callable[[str], str], postgres_dsn: str) -> None:
    """A small trial of the real worker with writes: every write row's version is the one
    PostgreSQL recorded, and every fill served a version committed by the end of its load and
    not older than the one committed before it began."""
    services = Services(redis_server("cache"), redis_server("lock-store"), redis_server("broker"),
                        postgres_dsn)
    workload = Workload(single(Query.ORDERS, KeySet.parse("hot"), 200), invalidate_rate=40.0)
    trial = trial_spec(4, 1.5, strategy="lock-dc", workload=workload.to_json())
    run_trial(trial, services)
    rows = sent_rows(services.broker_url, trial)
    writes = rows.filter(pc.equal(rows["op"], WRITE_OP)).sort_by("commit_ns")
    versions = writes["version_served"].to_pylist()
    assert len(versions) > 20 and writes["error"].null_count == writes.num_rows
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        recorded = [v for (v,) in conn.execute(
            "SELECT version FROM key_writes WHERE key = 'orders:0' AND version >= %s"
            " ORDER BY version", (versions[0],)).fetchall()]
    assert versions == recorded == list(range(versions[0], versions[0] + len(versions)))
    commits = writes["commit_ns"].to_pylist()
    fills = rows.filter(pc.and_(pc.equal(rows["outcome"], "filled"), pc.equal(rows["op"], "orders")))
    assert fills.num_rows > 5
    for fill in fills.to_pylist():
        began = fill["origin_start_ns"]
        ended = began + fill["origin_ns"]
        at_least = max([v for v, c in zip(versions, commits, strict=True) if c < began],
                       default=versions[0] - 1)
        at_most = max([v for v, c in zip(versions, commits, strict=True) if c < ended + 2_000_000],
                      default=versions[0] - 1)
        assert at_least <= fill["version_served"] <= at_most, fill
