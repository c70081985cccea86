"""The self-checks' pure parts: the client pool size in the task arguments, saturation thresholds.

Each check firing on a real worker against real Redis and PostgreSQL: tests/integration.
"""

from __future__ import annotations

import pytest

from model.wire import TrialSpec
from results.figures import checks
from tests.helpers import trial_spec


def test_spec_accepts_and_checks_redis_max_connections() -> None:
    data = trial_spec(2, 1.0, run_id="selfcheck", redis_max_connections=3).to_json()
    assert TrialSpec.from_json(data).redis_max_connections == 3
    assert TrialSpec.from_json({**data, "redis_max_connections": None}).redis_max_connections is None
    with pytest.raises(ValueError, match="redis_max_connections"):
        TrialSpec.from_json({**data, "redis_max_connections": 0})


def test_spec_carries_and_checks_the_redis_client_path() -> None:
    data = trial_spec(2, 1.0, run_id="selfcheck").to_json()
    assert TrialSpec.from_json(data).redis_client == "lean"  # the default path
    assert TrialSpec.from_json({**data, "redis_client": "pooled"}).redis_client == "pooled"
    for bad in ("hiredis", 1):
        with pytest.raises(ValueError, match="redis_client"):
            TrialSpec.from_json({**data, "redis_client": bad})


def test_saturation_thresholds() -> None:
    assert not checks.is_saturated(0.5, 1.0, 1.0)
    assert checks.is_saturated(checks.CPU_SATURATED, 0.0, 0.0)
    assert checks.is_saturated(0.1, checks.LAG_SATURATED_MS, 0.0)
    assert checks.is_saturated(0.1, 0.0, checks.RELEASE_LATE_MS)
    assert checks.saturation_reason({"max_worker_cpu": 0.1}) == ""
