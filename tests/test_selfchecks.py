"""Each self-check fires on the failure it exists for: real Redis and PostgreSQL, the real worker."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pyarrow.compute as pc
import pytest

from coordinator.origin import counters
from model.origin import ORIGIN_MARK, ORIGIN_SQL, window_for
from model.services import Services
from model.wire import TrialSpec
from results import checks, metrics, table, transport
from worker.trial import run_trial

pytestmark = pytest.mark.integration
SPAN_S = 6 * 3600.0


@pytest.fixture
def services(redis_server: Callable[[str], str], postgres_dsn: str) -> Services:
    return Services(redis_server("cache"), redis_server("lock-store"), redis_server("broker"),
                    postgres_dsn)


def spec(clients: int, seconds: float, **extra: Any) -> TrialSpec:
    start = time.time_ns() + 300_000_000
    return TrialSpec(run_id="selfcheck", trial=1, repeat=1, strategy="naive", params={},
                     worker_index=0, client_base=0, clients=clients, keys=["orders:0"], ttl_ms=200,
                     start_ns=start, end_ns=start + int(seconds * 1e9), clock_offset_ns=0,
                     pool_size=2, origin_span_s=SPAN_S, **extra)


def test_spec_accepts_and_checks_redis_max_connections() -> None:
    data = spec(2, 1.0, redis_max_connections=3).to_json()
    assert TrialSpec.from_json(data).redis_max_connections == 3
    assert TrialSpec.from_json({**data, "redis_max_connections": None}).redis_max_connections is None
    with pytest.raises(ValueError, match="redis_max_connections"):
        TrialSpec.from_json({**data, "redis_max_connections": 0})


def test_undersized_client_pool_shows_as_errors_not_fast_successes(services: Services) -> None:
    result = run_trial(spec(8, 1.0, redis_max_connections=2), services, lambda _: None)
    rows = transport.decode(result["rows"])
    errors = rows.filter(pc.equal(rows["outcome"], "error"))
    assert errors.num_rows > 0
    kinds = set(pc.utf8_slice_codeunits(errors["error"], 0, 40).to_pylist())
    assert any(k.startswith(("MaxConnectionsError", "ConnectionError")) for k in kinds), kinds
    rows = rows.append_column("in_window", pc.greater(rows["t_start_ns"], 0))
    window = metrics.Window(0, 2**62, 1)
    summary = metrics.summarise(rows, window, result["floor_p5_ns"] / 1e6)
    assert summary["errors"] == errors.num_rows and summary["error_rate"] > 0
    row = {"trial": 1, "strategy": "naive", "db_calls_match": True, **summary}
    assert any("MaxConnectionsError" in n or "ConnectionError" in n for n in table.notes([row]))


@pytest.fixture
def overload() -> Iterator[None]:
    """Busy threads in the worker's own process: the GIL is taken from the client threads."""
    stop = threading.Event()

    def spin() -> None:
        x = 0
        while not stop.is_set():
            x += 1

    threads = [threading.Thread(target=spin, daemon=True) for _ in range(6)]
    for t in threads:
        t.start()
    yield
    stop.set()
    for t in threads:
        t.join(timeout=5)


def test_overloaded_generator_raises_the_saturation_warning(services: Services,
                                                            overload: None) -> None:
    result = run_trial(spec(8, 1.5), services, lambda _: None)
    figures = checks.generator_figures([result])
    assert result["loop_lag_samples"] > 0
    assert figures["saturated"], figures
    row = {"trial": 1, "strategy": "naive", "below_floor": False, "db_calls_match": True,
           "errors": 0, **figures}
    assert any("saturated" in n for n in table.notes([row]))
    assert "SATURATED" in table.render([{**row, "requests": 1, "origin_per_expiry": 1.0,
                                         "rps": 1.0, "p50_ms": 1.0, "p99_ms": 1.0, "waits": 0,
                                         "stale_served": 0, "peak_origin_inflight": 1}])


def test_saturation_thresholds() -> None:
    assert not checks.is_saturated(0.5, 1.0, 1.0)
    assert checks.is_saturated(checks.CPU_SATURATED, 0.0, 0.0)
    assert checks.is_saturated(0.1, checks.LAG_SATURATED_MS, 0.0)
    assert checks.is_saturated(0.1, 0.0, checks.RELEASE_LATE_MS)
    assert checks.saturation_reason({"max_worker_cpu": 0.1}) == ""


def test_extra_origin_query_in_the_window_is_reported_as_a_mismatch(
        services: Services, reset_statements: str) -> None:
    dsn = reset_statements
    before_calls = counters.origin_db_calls(dsn)
    before = counters.statement_snapshot(dsn)
    trial = spec(4, 1.2)

    def intruder() -> None:  # someone else's query on the origin during the trial window
        time.sleep(0.5)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(ORIGIN_SQL, window_for("orders:0", SPAN_S)).fetchone()

    thread = threading.Thread(target=intruder)
    thread.start()
    result = run_trial(trial, services, lambda _: None)
    thread.join()
    db_calls = counters.origin_db_calls(dsn) - before_calls
    statements = checks.statement_rows(before, counters.statement_snapshot(dsn), "x", 1, (ORIGIN_MARK,))
    rows = transport.decode(result["rows"])
    client_calls = int(pc.sum(rows["origin_called"]).as_py())
    assert client_calls > 0 and db_calls == client_calls + 1
    assert "PostgreSQL counted" in checks.origin_mismatch(client_calls, db_calls)
    row = {"trial": 1, "strategy": "naive", "below_floor": False, "errors": 0,
           "db_calls_match": False, "origin_calls_total": client_calls, "db_calls": db_calls}
    assert any(f"{client_calls} origin calls, PostgreSQL counted {db_calls}" in n
               for n in table.notes([row]))
    origin = [s for s in statements if s["is_origin"]]
    assert len(origin) == 1 and origin[0]["calls"] == db_calls
    assert 0 < origin[0]["share"] <= 1 and origin[0]["mean_ms"] > 0
    assert abs(sum(s["share"] for s in statements) - 1) < 1e-9
