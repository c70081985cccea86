"""The worker's trial runner in-process against real services: rows, timing, clean errors."""

from __future__ import annotations

from collections.abc import Callable

import pyarrow.compute as pc
import pytest
import redis

from model.services import Services
from model.wire import TrialSpec
from results.store.schema import WIRE_SCHEMA
from tests.helpers import sent_rows, trial_spec
from worker.trial import run_trial

PATHS = pytest.mark.parametrize("path", ["lean", "pooled"])  # --redis-client


def spec(clients: int, seconds: float, strategy: str = "lock",
         params: dict[str, object] | None = None, path: str = "lean") -> TrialSpec:
    return trial_spec(clients, seconds, strategy=strategy, params=params, progress_interval_s=0.1,
                      redis_client=path)


@pytest.fixture
def services(redis_server: Callable[[str], str], postgres_dsn: str, cache: redis.Redis,
             locks: redis.Redis) -> Services:
    """Real services, with the cache and lock store flushed (the fixtures do that)."""
    return Services(redis_server("cache"), redis_server("lock-store"), redis_server("broker"),
                    postgres_dsn)


@PATHS
def test_clients_start_together_and_every_request_is_a_row(services: Services, path: str) -> None:
    trial = spec(clients=5, seconds=1.0, path=path)
    result = run_trial(trial, services)
    rows = sent_rows(services.broker_url, trial)
    assert rows.schema.equals(WIRE_SCHEMA)
    assert rows.num_rows == result.requests > 50
    assert result.batches >= 1 and result.dropped_rows == 0  # shipped as it ran, nothing lost
    assert sorted(set(rows["client"].to_pylist())) == [0, 1, 2, 3, 4]
    starts = rows["t_start_ns"]
    assert pc.min(starts).as_py() >= trial.start_ns
    assert pc.max(starts).as_py() < trial.end_ns
    assert rows["t_intended_ns"].equals(starts)  # closed loop: sent when intended
    assert set(rows["outcome"].to_pylist()) <= {"hit", "filled", "waited"}
    assert pc.sum(rows["origin_called"]).as_py() >= 1  # the 200 ms TTL expired several times
    assert 0 < result.floor_p5_ns < 50_000_000


@PATHS
def test_failures_become_error_rows_with_their_type(services: Services, path: str) -> None:
    # The cache answers, the lock store does not: with the fail-closed policy every miss fails
    # when it asks for the lock.
    broken = Services(services.cache_url, "redis://127.0.0.1:1/0", services.broker_url,
                      services.origin_dsn)
    trial = spec(clients=2, seconds=0.3, strategy="lock", params={"on_lock_error": "closed"},
                 path=path)
    run_trial(trial, broken)
    rows = sent_rows(services.broker_url, trial)
    assert rows.num_rows > 0
    assert set(rows["outcome"].to_pylist()) == {"error"}
    assert all(e.startswith("LockStoreDown") for e in rows["error"].to_pylist())
