"""Each self-check fires on the failure it exists for: real Redis and PostgreSQL, the real worker."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import psycopg
import pyarrow.compute as pc
import pytest

from coordinator.origin import counters
from model.origin import ORIGIN_MARK, ORIGIN_SQL, versioned, window_for
from model.services import Services
from model.wire import TrialSpec
from results.figures import checks, metrics
from results.outputs import table
from tests.helpers import sent_rows, trial_spec
from worker.trial import run_trial

SPAN_S = 6 * 3600.0


@pytest.fixture
def services(redis_server: Callable[[str], str], postgres_dsn: str) -> Services:
    return Services(redis_server("cache"), redis_server("lock-store"), redis_server("broker"),
                    postgres_dsn)


def spec(clients: int, seconds: float, **extra: object) -> TrialSpec:
    return trial_spec(clients, seconds, run_id="selfcheck", origin_span_s=SPAN_S, **extra)


@pytest.mark.parametrize("path", ["lean", "pooled"])  # --redis-client: the same bound either way
def test_undersized_client_pool_shows_as_errors_not_fast_successes(services: Services,
                                                                   path: str) -> None:
    trial = spec(8, 1.0, redis_max_connections=2, redis_client=path)
    result = run_trial(trial, services)
    rows = sent_rows(services.broker_url, trial)
    errors = rows.filter(pc.equal(rows["outcome"], "error"))
    assert errors.num_rows > 0
    kinds = set(pc.utf8_slice_codeunits(errors["error"], 0, 40).to_pylist())
    assert any(k.startswith(("MaxConnectionsError", "ConnectionError")) for k in kinds), kinds
    rows = rows.append_column("in_window", pc.greater(rows["t_start_ns"], 0))
    window = metrics.Window(0, 2**62)
    summary = metrics.summarise(rows, window, result.floor_p5_ns / 1e6)
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
    result = run_trial(spec(8, 1.5), services)
    figures = checks.generator_figures([result])
    assert result.loop_lag_samples > 0
    assert figures["saturated"], figures
    row = {"trial": 1, "strategy": "naive", "below_floor": False, "db_calls_match": True,
           "errors": 0, **figures}
    assert any("saturated" in n for n in table.notes([row]))
    assert "SATURATED" in table.render([{**row, "requests": 1, "origin_per_expiry": 1.0,
                                         "rps": 1.0, "p50_ms": 1.0, "p99_ms": 1.0, "waits": 0,
                                         "stale_served": 0, "peak_origin_inflight": 1}])


def test_extra_origin_query_in_the_window_is_reported_as_a_mismatch(
        services: Services, reset_statements: str) -> None:
    dsn = reset_statements
    before_calls = counters.origin_db_calls(dsn)
    before = counters.statement_snapshot(dsn)
    trial = spec(4, 1.2)

    def intruder() -> None:  # someone else's query on the origin during the trial window
        time.sleep(0.5)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(versioned(ORIGIN_SQL), ("orders:0", *window_for("orders:0", SPAN_S))).fetchone()

    thread = threading.Thread(target=intruder)
    thread.start()
    run_trial(trial, services)
    thread.join()
    db_calls = counters.origin_db_calls(dsn) - before_calls
    statements = checks.statement_rows(before, counters.statement_snapshot(dsn), "x", 1, (ORIGIN_MARK,))
    rows = sent_rows(services.broker_url, trial)
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
