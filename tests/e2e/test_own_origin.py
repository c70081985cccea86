"""Your own statement as the origin, end to end: a table and statement this test creates in a
database of its own, ``--origin-dsn`` alone (the embedded stack starts cache, lock store, broker
and workers, no PostgreSQL), naive against lock-dc; PostgreSQL's count of that statement."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import psycopg
import pyarrow.parquet as pq
import pytest
import redis

from tests.helpers import alive, coordinator, stack_pids
from tests.own_origin import KEYS_SQL, STATEMENT, own_database, table_cell, tables

LAUNCH = ("--workers", "2", "--clients", "24", "--seconds", "4", "--ttl", "1")


@pytest.fixture(scope="module")
def own_dsn(postgres_dsn: str) -> str:
    return own_database(postgres_dsn, "own_origin_e2e")


@pytest.fixture(scope="module")
def sql_run(own_dsn: str, tmp_path_factory: pytest.TempPathFactory
            ) -> tuple[Path, subprocess.CompletedProcess[str]]:
    out = tmp_path_factory.mktemp("own") / "run"
    done = coordinator("launch", "--origin-dsn", own_dsn, "--origin-sql", STATEMENT,
                       "--keys-sql", KEYS_SQL, "--strategies", "naive,lock-dc", *LAUNCH,
                       "--out", str(out), timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return out, done


def test_naive_herds_on_your_statement_lock_dc_fills_once_and_the_database_agrees(
        sql_run: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    out, done = sql_run
    trials = {r["strategy"]: r for r in pq.read_table(out / "trials.parquet").to_pylist()}
    naive, lock_dc = trials["naive"], trials["lock-dc"]
    assert naive["origin_per_expiry"] >= 8, naive  # most of 24 clients miss together
    assert lock_dc["origin_per_expiry"] <= 1.5, lock_dc
    assert naive["origin_per_expiry"] >= 5 * lock_dc["origin_per_expiry"]
    for row in trials.values():
        assert row["db_check"] == "ok", row["db_check_detail"]
        assert row["db_calls_match"] and row["db_calls"] == row["origin_calls_total"] > 0
        assert row["db_check_detail"].startswith("pg_stat_statements: calls of query id ")
        assert row["errors"] == 0, row["error_types"]
    assert table_cell(done.stdout, "naive", "db check") == "ok"


def test_only_the_rest_of_the_stack_is_started_and_nothing_is_written(
        sql_run: tuple[Path, subprocess.CompletedProcess[str]], own_dsn: str) -> None:
    out, done = sql_run
    pids = stack_pids(done.stderr)
    assert len(pids) == 3 + 2, done.stderr  # cache, lock store, broker, two workers: no postgres
    assert "postgres=" not in done.stderr
    assert [p for p in pids if alive(p)] == []
    assert tables(own_dsn) == {"own_items"}  # no key_writes, no orders: nothing seeded or added
    meta = json.loads((out / "run.json").read_text())
    assert meta["origin"]["kind"] == "sql" and meta["origin"]["read_only"] is True
    assert meta["origin"]["statement"] == STATEMENT
    assert meta["manifest"]["options"]["given"] == ["origin_dsn"]
    keys = meta["manifest"]["options"]["workload"]["endpoints"][0]["key_list"]
    assert keys == ["1"]
    assert "seeded" not in done.stderr and "calibrat" not in done.stderr


def test_without_pg_stat_statements_the_check_says_unchecked_never_ok(
        postgres_dsn: str, tmp_path: Path) -> None:
    bare = own_database(postgres_dsn, "own_origin_bare", extension=False)
    out = tmp_path / "run"
    done = coordinator("launch", "--origin-dsn", bare, "--origin-sql", STATEMENT, "--keys-sql",
                       KEYS_SQL, "--strategies", "naive", "--workers", "1", "--clients", "4",
                       "--seconds", "2", "--ttl", "0.5", "--out", str(out), timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    (row,) = pq.read_table(out / "trials.parquet").to_pylist()
    assert row["db_check"] == "unchecked" and row["db_calls"] == -1 and not row["db_calls_match"]
    assert "pg_stat_statements is not installed" in row["db_check_detail"]
    assert table_cell(done.stdout, "naive", "db check") == "unchecked"
    assert "origin calls unchecked: pg_stat_statements is not installed" in done.stdout


def test_rerun_needs_your_database_again_and_repeats_the_run(
        sql_run: tuple[Path, subprocess.CompletedProcess[str]], own_dsn: str,
        tmp_path: Path) -> None:
    out, _ = sql_run
    refused = coordinator("rerun", str(out), "--out", str(tmp_path / "no"), timeout=60)
    assert refused.returncode == 2, refused.stderr
    assert "was given --origin-dsn; give it again" in refused.stderr
    assert not (tmp_path / "no").exists()
    again = coordinator("rerun", str(out), "--origin-dsn", own_dsn, "--out", str(tmp_path / "again"),
                        timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    trials = pq.read_table(tmp_path / "again" / "trials.parquet").to_pylist()
    assert [t["strategy"] for t in trials] == ["naive", "lock-dc"]
    assert all(t["db_check"] == "ok" for t in trials)
    meta = json.loads((tmp_path / "again" / "run.json").read_text())
    assert meta["manifest"]["options"]["workload"]["endpoints"][0]["key_list"] == ["1"]
    assert "rerun: " in again.stdout


def test_writes_only_with_write_sql_and_then_versioned(postgres_dsn: str, tmp_path: Path) -> None:
    """--write-sql at --invalidate-rate: the user's own update, the keys' versions in key_writes
    (the one table added, only now), the consistency figures; the ``$1`` placeholder form."""
    dsn = own_database(postgres_dsn, "own_origin_writes")
    out = tmp_path / "run"
    done = coordinator("launch", "--origin-dsn", dsn, "--origin-sql",
                       "SELECT id, body FROM own_items WHERE id = $1::int", "--keys-sql", KEYS_SQL,
                       "--write-sql", "UPDATE own_items SET body = body || 'y' WHERE id = $1::int",
                       "--invalidate-rate", "5", "--strategies", "lock-dc", "--workers", "1",
                       "--clients", "4", "--seconds", "3", "--ttl", "1", "--out", str(out),
                       timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    (row,) = pq.read_table(out / "trials.parquet").to_pylist()
    assert row["writes"] > 0 and row["db_check"] == "ok", row
    assert tables(dsn) == {"own_items", "key_writes"}
    with psycopg.connect(dsn) as conn:
        body = conn.execute("SELECT body FROM own_items WHERE id = 1").fetchone()
        versions = conn.execute("SELECT max(version) FROM key_writes WHERE key = '1'").fetchone()
    assert body is not None and body[0].endswith("y")
    assert versions is not None and versions[0] >= row["writes"]


def test_a_cache_given_beside_an_embedded_rest(redis_server: Callable[[str], str],
                                               tmp_path: Path) -> None:
    """Any mix: --cache-url alone measures that Redis, the stack starts the lock store, the
    broker, PostgreSQL (seeded, as always when it starts it) and the workers."""
    url = redis_server("given-cache")
    before = int(redis.Redis.from_url(url).info("stats")["total_commands_processed"])
    done = coordinator("launch", "--cache-url", url, "--strategies", "lock-dc", "--workers", "1",
                       "--clients", "4", "--seconds", "3", "--ttl", "1", "--scale", "5000",
                       "--origin-ms", "0.5", "--out", str(tmp_path / "run"), timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"given, not started: cache_url {url}" in done.stderr
    names = [kv.split("=")[0] for line in done.stderr.splitlines()
             if line.startswith("stack pids:") for kv in line.split()[2:]]
    assert sorted(names) == ["broker", "lock-store", "postgres", "w1@stampede-local"]
    after = int(redis.Redis.from_url(url).info("stats")["total_commands_processed"])
    assert after - before > 1000  # the clients' GETs went to the given cache
    (row,) = pq.read_table(tmp_path / "run" / "trials.parquet").to_pylist()
    assert row["db_check"] == "ok" and row["errors"] == 0
