"""``coordinator launch --client-driver asyncio`` end to end on the embedded stack: 1,000
coroutine clients over 2 workers (one event loop each, a connection of its own per client),
the same rows, the same delivery and the same database cross-check as the threads."""

from __future__ import annotations

import subprocess
from pathlib import Path

import orjson
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from tests.helpers import coordinator

CLIENTS = 1000


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    out = tmp_path_factory.mktemp("runs") / "aio"
    proc = coordinator("launch", "--client-driver", "asyncio", "--clients", str(CLIENTS),
                       "--workers", "2", "--strategies", "naive,lock", "--seconds", "5",
                       "--ttl", "1", "--scale", "100000", "--out", str(out), timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out, proc


def test_every_row_arrives_and_the_database_agrees(
        run: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    out, proc = run
    trials = {r["strategy"]: r for r in pq.read_table(out / "trials.parquet").to_pylist()}
    requests = ds.dataset(out / "requests", format="parquet", partitioning="hive").to_table()
    for name, row in trials.items():
        print(f"{name}: {row['requests']:,} requests, {row['rps']:,.0f} rps, origin/expiry "
              f"{row['origin_per_expiry']:.1f} ({row['expiry_events']} events), p99 "
              f"{row['p99_ms']:.1f} ms, db {row['db_calls']} = clients {row['origin_calls_total']}")
        assert row["client_driver"] == "asyncio"
        assert row["complete"], row
        assert row["db_calls_match"], row
        assert row["db_calls"] == row["origin_calls_total"] > 0
        assert row["batches_missing"] == row["rows_dropped"] == row["batches_duplicated"] == 0
        assert row["errors"] == 0, row["error_types"]
        mine = requests.filter(pc.equal(requests["strategy"], name))
        assert row["rows_written"] == mine.num_rows
        clients = mine.filter(pc.greater_equal(mine["client"], 0))["client"]  # no refresh rows
        assert pc.count_distinct(clients).as_py() == CLIENTS  # every coroutine's rows are here
        assert len(set(mine["worker"].to_pylist())) == 2
    meta = orjson.loads((out / "run.json").read_bytes())
    assert meta["spec"]["client_driver"] == "asyncio"
    assert meta["manifest"]["options"]["client_driver"] == "asyncio"
    assert "db calls match" in proc.stdout + proc.stderr


def test_the_lock_keeps_the_herd_naive_does_not(
        run: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    out, _ = run
    trials = {r["strategy"]: r for r in pq.read_table(out / "trials.parquet").to_pylist()}
    naive, lock = trials["naive"], trials["lock"]
    assert naive["expiry_events"] >= 1 and lock["expiry_events"] >= 1
    assert naive["origin_per_expiry"] >= 100  # most of the 1,000 clients reach the origin
    assert lock["origin_per_expiry"] <= 5  # plain lock is not 1.0: see README
    assert lock["origin_per_expiry"] * 10 < naive["origin_per_expiry"]
    assert lock["waits"] > 0


def test_an_open_loop_sends_on_the_plan_and_measures_from_the_intended_instant(
        tmp_path: Path) -> None:
    """``--rate``: the coroutines share the worker's plan of sends (worker.schedule.Arrivals):
    every planned send is a row (sent, or dropped as an error row), each latency counted from
    its intended instant."""
    out = tmp_path / "open"
    proc = coordinator("launch", "--client-driver", "asyncio", "--clients", "200", "--workers",
                       "2", "--strategies", "naive", "--rate", "1000", "--seconds", "4",
                       "--ttl", "1", "--scale", "100000", "--out", str(out), timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    row = pq.read_table(out / "trials.parquet").to_pylist()[0]
    assert row["client_driver"] == "asyncio" and row["db_calls_match"], row
    assert row["batches_missing"] == row["rows_dropped"] == 0
    rows = ds.dataset(out / "requests", format="parquet", partitioning="hive").to_table()
    sent = rows.filter(pc.greater_equal(rows["client"], 0))
    assert abs(sent.num_rows - 4 * 1000) <= 4  # 1,000/s over the 4-s trial (each segment floored)
    intended, start = sent["t_intended_ns"], sent["t_start_ns"]
    lateness = pc.subtract(start, intended)
    assert pc.min(pc.subtract(sent["latency_ns"], lateness)).as_py() >= 0
    gaps = sorted(intended.to_pylist())
    assert gaps[-1] - gaps[0] <= 4 * 10**9 and len(set(gaps)) == len(gaps)  # one send an instant
    print(f"open loop: {sent.num_rows:,} sends, late {row['late_sends']}, dropped "
          f"{row['dropped_sends']}, p99 {row['p99_ms']:.1f} ms")
