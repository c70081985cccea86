"""``coordinator launch`` end to end on the embedded stack, as a user runs it."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import orjson
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from tests.helpers import alive, coordinator, stack_pids

REQUEST_COLUMNS = {
    "run_id", "trial", "strategy", "repeat", "worker", "client", "key", "op", "t_intended_ns",
    "t_start_ns", "latency_ns", "outcome", "origin_called", "origin_ns", "pool_wait_ns",
    "lock_wait_ns", "error", "in_window",
}
TRIAL_COLUMNS = {
    "run_id", "trial", "strategy", "params", "repeat", "workers", "clients", "ttl_s", "window_s",
    "requests", "errors", "error_rate", "rps", "p50_ms", "p99_ms", "max_ms", "origin_calls",
    "expiry_events", "origin_per_expiry", "peak_origin_inflight", "stale_served", "waits",
    "db_calls", "db_calls_match",
}


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    out = tmp_path_factory.mktemp("runs") / "e2e"
    proc = coordinator("launch", "--workers", "3", "--seconds", "4", "--ttl", "1", "--scale", "100000",
                       "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out, proc


def test_parquet_follows_the_contract(run: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    out, _ = run
    requests = ds.dataset(out / "requests", format="parquet", partitioning="hive").to_table()
    assert set(requests.column_names) >= REQUEST_COLUMNS
    assert requests.num_rows > 1000
    assert len(set(requests["worker"].to_pylist())) == 3
    trials = pq.read_table(out / "trials.parquet")
    assert set(trials.column_names) >= TRIAL_COLUMNS
    assert trials["strategy"].to_pylist() == ["naive", "lock"]


def test_naive_herds_lock_does_not_and_the_database_agrees(
        run: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    out, proc = run
    trials = {r["strategy"]: r for r in pq.read_table(out / "trials.parquet").to_pylist()}
    naive, lock = trials["naive"], trials["lock"]
    assert naive["origin_per_expiry"] >= 10
    assert naive["origin_per_expiry"] >= 5 * max(lock["origin_per_expiry"], 1.0)
    assert lock["origin_per_expiry"] <= 5  # plain lock is not 1.0: see README
    assert lock["waits"] > 0
    for row in trials.values():
        assert row["db_calls_match"], row
        assert row["db_calls"] == row["origin_calls_total"] > 0
        assert row["errors"] == 0, row["error_types"]
    assert "naive" in proc.stdout and "db check" in proc.stdout


def test_run_json_records_the_run_with_masked_services(
        run: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    out, _ = run
    meta = orjson.loads((out / "run.json").read_bytes())
    assert meta["status"] == "complete"
    assert meta["schema_version"] >= 1
    assert meta["spec"]["workers"] == 3 and meta["spec"]["embedded_stack"] is True
    assert set(meta["services"]) == {"cache_url", "lock_url", "broker_url", "origin_dsn", "memcache_url"}
    assert len(meta["clock_offsets"]) == 3
    assert meta["origin"]["median_ms"] > 0
    assert [t["complete"] for t in meta["trials"]] == [True, True]


def test_no_process_of_the_stack_is_left(run: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    _, proc = run
    pids = stack_pids(proc.stderr)
    area = re.search(r"^stack: work area (\S+)$", proc.stderr, flags=re.M)
    assert area, proc.stderr
    assert len(pids) == 3 + 1 + 3, proc.stderr  # three Redis servers, PostgreSQL, three workers
    assert [p for p in pids if alive(p)] == []
    assert not Path(area.group(1)).exists()
