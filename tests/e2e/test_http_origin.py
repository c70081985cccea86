"""An HTTP service as the origin, end to end: a real one (gunicorn, tests/http_service.py), its
own Prometheus counter read before and after each trial; one that answers 503 and one that
stalls past the read timeout. The embedded stack starts no PostgreSQL."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from tests.helpers import coordinator
from tests.http_service import COUNTER
from tests.own_origin import table_cell


def launch(base: str, route: str, out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    keys = out.parent / "keys.txt"
    keys.write_text("# the hot key first\n7\n8\n")
    return coordinator("launch", "--origin-url", f"{base}/{route}/{{key}}", "--keys-file", str(keys),
                       "--keys", "hot", "--origin-counter-url", f"{base}/metrics",
                       "--origin-counter-name", COUNTER % route, "--ttl", "1", "--out", str(out),
                       *args, timeout=300)


@pytest.fixture(scope="module")
def items_run(http_service: str, tmp_path_factory: pytest.TempPathFactory
              ) -> tuple[Path, subprocess.CompletedProcess[str]]:
    out = tmp_path_factory.mktemp("http") / "run"
    done = launch(http_service, "items", out, "--strategies", "naive,lock-dc", "--workers", "2",
                  "--clients", "24", "--seconds", "4")
    assert done.returncode == 0, done.stderr[-3000:]
    return out, done


def test_naive_herds_lock_dc_fills_once_and_the_services_counter_agrees(
        items_run: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    out, done = items_run
    trials = {r["strategy"]: r for r in pq.read_table(out / "trials.parquet").to_pylist()}
    naive, lock_dc = trials["naive"], trials["lock-dc"]
    assert naive["origin_per_expiry"] >= 8 and lock_dc["origin_per_expiry"] <= 1.5
    assert naive["origin_per_expiry"] >= 5 * lock_dc["origin_per_expiry"]
    for row in trials.values():
        assert row["db_check"] == "ok", row["db_check_detail"]
        assert row["db_calls"] == row["origin_calls_total"] > 0 and row["errors"] == 0
        assert row["db_check_detail"].startswith(COUNTER % "items")
    assert naive["peak_origin_inflight"] <= 2 * 4  # the bounded pool: 4 connections per worker
    assert table_cell(done.stdout, "lock-dc", "db check") == "ok"
    assert "postgres=" not in done.stderr


def test_the_herd_waits_for_the_pool_apart_from_the_call(
        items_run: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    out, _ = items_run
    rows = ds.dataset(out / "requests", format="parquet", partitioning="hive").to_table(
        filter=(pc.field("strategy") == "naive") & (pc.field("origin_called") == 1))
    waits = rows["pool_wait_ns"].to_pylist()
    assert max(waits) > 1_000_000  # 12 clients of a worker missing at once, 4 connections
    assert all(o > 0 for o in rows["origin_ns"].to_pylist())


@pytest.mark.parametrize(("route", "error", "extra"), [
    ("fail", "HttpStatusError: 503 Service Unavailable", ()),
    ("slow", "ReadTimeoutError", ("--http-read-ms", "200")),
])
def test_a_failing_service_is_error_rows_of_their_type_and_the_counter_still_agrees(
        http_service: str, tmp_path: Path, route: str, error: str, extra: tuple[str, ...]) -> None:
    out = tmp_path / "run"
    done = launch(http_service, route, out, "--strategies", "naive", "--workers", "1",
                  "--clients", "4", "--seconds", "3", *extra)
    assert done.returncode == 0, done.stderr[-3000:]
    (row,) = pq.read_table(out / "trials.parquet").to_pylist()
    assert row["errors"] > 0 and error in row["error_types"], row["error_types"]
    assert row["db_check"] == "ok" and row["db_calls"] == row["origin_calls_total"] > 0, row
    rows = ds.dataset(out / "requests", format="parquet", partitioning="hive").to_table()
    errors = rows.filter(pc.field("outcome") == "error")
    assert all(e.startswith(error.split(":", maxsplit=1)[0]) for e in errors["error"].to_pylist())
    if route == "slow":  # a stalled call costs the read timeout, not less
        assert min(errors["latency_ns"].to_pylist()) >= 0.19e9
