"""An HTTP service as the origin, against a real one (gunicorn serving tests/http_service.py):
each failure is an exception of its own type (the error row's), a call is counted when its
request went out and the service's own counter agrees, the pool wait is apart from the call."""

from __future__ import annotations

import re
import threading

import pytest
from urllib3.exceptions import NewConnectionError, ProtocolError, ReadTimeoutError

from coordinator.origin.check import counter_value
from coordinator.stack.processes import free_port
from model.custom import CustomOrigin, OriginKind
from model.http.origin import HttpLoader, HttpPoolTimeout, key_path, shared_pool
from model.http.response import HttpStatusError
from strategies import Probe
from strategies.version import version_of
from tests.http_service import COUNTER, ITEM_DELAY_S


def loader(url: str, size: int = 2, read_ms: float = 1000, pool_timeout_s: float = 5.0
           ) -> HttpLoader:
    shared_pool.cache_clear()
    origin = CustomOrigin(OriginKind.HTTP, url, read_timeout_s=read_ms / 1000)
    return HttpLoader(origin, size, pool_timeout_s=pool_timeout_s)


def count(base: str, route: str) -> int:
    try:
        return round(counter_value(f"{base}/metrics", COUNTER % route))
    except Exception:  # noqa: BLE001 - no sample of the route yet: none counted
        return 0


def test_a_value_is_the_body_stamped_and_the_call_is_counted(http_service: str) -> None:
    before = count(http_service, "items")
    probe = Probe()
    value = loader(f"{http_service}/items/{{key}}").load("a b/c", probe)
    assert version_of(value) == 0 and b'"key": "a b/c"' in value[8:]  # percent-encoded, decoded back
    assert probe.origin_calls == 1 and probe.origin_ns >= ITEM_DELAY_S * 1e9
    assert count(http_service, "items") == before + 1


@pytest.mark.parametrize(("route", "error", "says"), [
    ("fail", HttpStatusError, "503 Service Unavailable"),
    ("slow", ReadTimeoutError, "Read timed out"),
    ("reset", ProtocolError, "Connection aborted"),
])
def test_each_failure_raises_its_own_type_and_is_a_call_the_service_counted(
        http_service: str, route: str, error: type[Exception], says: str) -> None:
    before = count(http_service, route)
    probe = Probe()
    with pytest.raises(error, match=says):
        loader(f"{http_service}/{route}/{{key}}", read_ms=200).load("k", probe)
    assert probe.origin_calls == 1
    assert count(http_service, route) == before + 1


def test_a_refused_connect_is_an_error_and_no_call() -> None:
    probe = Probe()
    with pytest.raises(NewConnectionError):
        loader(f"http://127.0.0.1:{free_port()}/items/{{key}}").load("k", probe)
    assert probe.origin_calls == 0


def _behind_one(one: HttpLoader, second: Probe) -> Probe:
    """Load a key on ``one`` while another thread holds its only connection (a stalled call)."""
    first = Probe()
    holder = threading.Thread(target=one.load, args=("k", first))
    holder.start()
    try:
        threading.Event().wait(0.1)
        one.load("k", second)
    finally:
        holder.join()
    return first


def test_the_pool_wait_is_recorded_apart_from_the_call(http_service: str) -> None:
    second = Probe()
    first = _behind_one(loader(f"{http_service}/slow/{{key}}", size=1, read_ms=5000,
                               pool_timeout_s=5.0), second)
    assert first.pool_wait_ns < 0.05e9 and first.origin_calls == 1
    assert second.pool_wait_ns >= 1.0e9  # the first call's stall of 1.5 s, less 0.1 s
    assert second.origin_calls == 1 and second.origin_ns >= 1.4e9


def test_an_exhausted_pool_is_an_error_never_a_hang(http_service: str) -> None:
    second = Probe()
    with pytest.raises(HttpPoolTimeout, match=re.escape("no connection of 1 free within 0.3 s")):
        _behind_one(loader(f"{http_service}/slow/{{key}}", size=1, read_ms=5000,
                           pool_timeout_s=0.3), second)
    assert second.pool_wait_ns >= 0.29e9 and second.origin_calls == 0


def test_the_key_goes_into_the_path_percent_encoded() -> None:
    assert key_path("http://h:1/items/{key}?v=1", "a/b c") == "/items/a%2Fb%20c?v=1"
    assert key_path("http://h:1/get?id={key}", "7") == "/get?id=7"
