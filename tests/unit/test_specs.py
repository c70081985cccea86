"""Strategy specs, task arguments and URL masking: pure parsing and validation."""

from __future__ import annotations

from typing import Any

import pytest

import strategies
from model.services import Services, mask_url
from model.wire import InvalidTaskArguments, TrialSpec


def test_strategy_spec_parses_parameters_with_types() -> None:
    spec = strategies.parse("lock:poll_ms=2,max_wait_ms=500")
    assert spec.name == "lock"
    assert spec.params["poll_ms"] == 2.0 and spec.params["max_wait_ms"] == 500.0
    assert spec.label == "lock:max_wait_ms=500,poll_ms=2"
    assert strategies.parse("lock").label == "lock"


@pytest.mark.parametrize(("text", "message"), [
    ("nope", "unknown strategy 'nope' \\(known: .*lock.*naive"),
    ("lock:speed=3", "unknown parameter 'speed' \\(parameters: .*max_wait_ms.*poll_ms"),
    ("lock:poll_ms=fast", "poll_ms='fast' is not a valid float"),
    ("lock:poll_ms=0", "poll_ms must be > 0"),
    ("lock:poll_ms", "write key=value"),
])
def test_bad_strategy_specs_say_what_is_allowed(text: str, message: str) -> None:
    with pytest.raises(strategies.InvalidStrategy, match=message):
        strategies.parse(text)


def good_spec(**overrides: Any) -> dict[str, Any]:
    spec = {
        "run_id": "r1", "trial": 1, "repeat": 1, "strategy": "lock", "params": {"poll_ms": 5},
        "worker_index": 0, "client_base": 0, "clients": 10, "keys": ["orders:0"], "ttl_ms": 2000,
        "start_ns": 10**18, "end_ns": 10**18 + 10**10, "clock_offset_ns": 0, "pool_size": 4,
        "origin_span_s": 3600.0,
    }
    spec.update(overrides)
    return spec


def test_valid_task_arguments_round_trip() -> None:
    spec = TrialSpec.from_json(good_spec())
    assert TrialSpec.from_json(spec.to_json()) == spec


@pytest.mark.parametrize(("overrides", "message"), [
    ({"clients": 0}, "clients=0 is outside"),
    ({"clients": "10"}, "clients must be int, got str"),
    ({"clients": True}, "clients must be int, got bool"),
    ({"run_id": "../etc"}, "run_id"),
    ({"strategy": "pickle"}, "unknown strategy"),
    ({"end_ns": 10**18}, "end_ns - start_ns=0"),
    ({"keys": []}, "keys must hold"),
    ({"evil": 1}, "unknown fields: evil"),
])
def test_bad_task_arguments_are_rejected(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidTaskArguments, match=message):
        TrialSpec.from_json(good_spec(**overrides))


def test_missing_fields_and_non_objects_are_rejected() -> None:
    with pytest.raises(InvalidTaskArguments, match="missing fields: clients"):
        TrialSpec.from_json({k: v for k, v in good_spec().items() if k != "clients"})
    with pytest.raises(InvalidTaskArguments, match="must be an object"):
        TrialSpec.from_json(["not", "a", "dict"])


def test_passwords_are_masked() -> None:
    assert mask_url("redis://:s3cret@cache:6379/0") == "redis://:***@cache:6379/0"
    assert mask_url("postgresql://app:pw@db/x?sslmode=require&password=pw") == (
        "postgresql://app:***@db/x?sslmode=require&password=***")
    assert mask_url("redis://127.0.0.1:6379/0") == "redis://127.0.0.1:6379/0"
    services = Services("redis://:a@h/0", "redis://h/1", "redis://:b@h/2", "postgresql://u:c@h/d")
    assert "a@" not in str(services.masked()) and ":***@" in services.masked()["origin_dsn"]


def test_services_from_env_names_missing_variables() -> None:
    with pytest.raises(KeyError, match="STAMPEDE_LOCK_URL"):
        Services.from_env({"STAMPEDE_CACHE_URL": "redis://h"})


def test_baseline_task_arguments_are_checked() -> None:
    from worker.baseline import BaselineSpec, InvalidBaseline

    ok = {"clients": 25, "key": "orders:0", "start_ns": 1, "seconds": 5}
    assert BaselineSpec.from_json(ok).clients == 25
    assert BaselineSpec.from_json(ok).client == "pooled"  # what the task meant before issue 18
    assert BaselineSpec.from_json({**ok, "client": "socket"}).client == "socket"
    for bad in ({**ok, "clients": 0}, {**ok, "seconds": -1}, {**ok, "key": ""}, {"clients": 1},
                {**ok, "client": "udp"}, {**ok, "clients": 2, "extra": 1}):
        with pytest.raises(InvalidBaseline):
            BaselineSpec.from_json(bad)
