"""An HTTP trial through the worker (``TrialSpec.http``): every client thread GETs the target on
a keep-alive connection of its own, every request a row with the response's status, bytes,
cache status and Age, and the outcome the response's headers give (worker/http_fetch.py).

Targets: a static nginx (no outcome header: ``answered``) and gunicorn's header-echo route
(tests/http_service.py: the app tier's X-Stampede-* and an HTTP cache's X-Cache-Status)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from bench.nginx_static import BODY, StaticNginx, nginx_binary, start_nginx
from model.http.target import HttpTarget
from model.services import Services
from model.wire import InvalidTaskArguments, TrialSpec
from model.workload import KeySet, Query, Workload, single
from strategies import Outcome, Probe
from tests.helpers import sent_rows, trial_spec
from worker.http_fetch import HttpFetch
from worker.trial import run_trial

needs_nginx = pytest.mark.skipif(nginx_binary() is None,
                                 reason="nginx is not installed (make test-deps installs it)")


@pytest.fixture
def services(redis_server: Callable[[str], str]) -> Services:
    """The cache (the floor's, when the target names no floor path) and the broker; no origin."""
    return Services(redis_server("cache"), redis_server("lock-store"), redis_server("broker"), "")


@pytest.fixture(scope="module")
def nginx() -> Iterator[StaticNginx]:
    server = start_nginx(log=True)
    yield server
    server.stop()


def http_spec(target: HttpTarget, clients: int = 3, seconds: float = 0.5,
              **extra: Any) -> TrialSpec:
    spec = trial_spec(clients, seconds, progress_interval_s=0.1, http=target.to_json(), **extra)
    return TrialSpec.from_json(spec.to_json())  # as the worker's task takes it: checked


def run(spec: TrialSpec, services: Services) -> pa.Table:
    result = run_trial(spec, services)
    rows = sent_rows(services.broker_url, spec)
    assert rows.num_rows == result.requests > 0 and result.dropped_rows == 0
    return rows


def only(rows: pa.Table, column: str) -> set[Any]:
    return set(rows[column].to_pylist())


@needs_nginx
def test_a_static_target_is_answered_rows_one_connection_per_client(
        nginx: StaticNginx, services: Services) -> None:
    target = HttpTarget.parse(nginx.base + "/k/{key}", floor_path="/floor")
    before = len(nginx.log_lines())
    spec = http_spec(target, clients=3)
    result = run_trial(spec, services)
    rows = sent_rows(services.broker_url, spec)
    assert rows.num_rows == result.requests > 30
    assert only(rows, "outcome") == {"answered"} and only(rows, "error") == {None}
    assert only(rows, "http_status") == {200} and only(rows, "http_bytes") == {len(BODY)}
    assert only(rows, "cache_status") == {""} and only(rows, "age_s") == {-1}
    assert only(rows, "origin_called") == {0}  # the server's own rows count its origin calls
    assert only(rows, "client") == {0, 1, 2}
    assert result.floor_p5_ns > 0  # sequential GETs of /floor
    time.sleep(0.2)
    lines = nginx.log_lines()[before:]
    trial = [line for line in lines if line[3].startswith("/k/")]
    assert len(trial) == rows.num_rows  # every GET a row, every row a GET nginx served
    assert len({line[0] for line in trial}) == 3  # one keep-alive connection per client thread
    floor = [line for line in lines if line[3] == "/floor"]
    assert len(floor) >= 20 and len({line[0] for line in floor}) == 1


@needs_nginx
def test_an_open_loop_over_http_sends_at_the_intended_instants(
        nginx: StaticNginx, services: Services) -> None:
    spec = http_spec(HttpTarget.parse(nginx.base + "/k/{key}"), clients=2, seconds=1.0,
                     workload=workload(rates=(200.0,)))
    rows = run(spec, services)
    assert 150 <= rows.num_rows <= 210  # 200 sends a second for 1 s (the last may fall off)
    gaps = pc.subtract(rows["t_start_ns"], rows["t_intended_ns"]).to_pylist()
    assert min(gaps) >= 0 and only(rows, "outcome") == {"answered"}


def test_without_a_floor_path_the_floor_is_the_caches_round_trip(services: Services) -> None:
    spec = http_spec(HttpTarget.parse("http://127.0.0.1:9/k/{key}", connect_ms=50), clients=1,
                     seconds=0.1)
    assert run_trial(spec, services).floor_p5_ns > 0
    sent_rows(services.broker_url, spec)  # read: the next trial's stream starts empty


def workload(**options: Any) -> dict[str, Any]:
    """The default workload's JSON (the hot key, 200 ms TTL) with ``options`` changed."""
    return Workload(single(Query.ORDERS, KeySet(), 200), **options).to_json()


ECHO = "/headers/{key}?"


@pytest.mark.parametrize(("query", "outcome", "fields"), [
    # the app's own word and its measurements
    ("outcome=waited&lock_wait_ns=1234&version=7&local_hit=1&fallback=1",
     "waited", {"lock_wait_ns": 1234, "version_served": 7, "local_hit": 1, "fallback": True,
                "cache_status": ""}),
    ("outcome=stale&stale_age_ns=5000&cache=MISS", "stale",
     {"stale_age_ns": 5000, "cache_status": "MISS"}),
    ("outcome=FILLED&cache=expired", "filled", {"cache_status": "EXPIRED", "version_served": -1}),
    # an HTTP cache's replay: its word wins, the replayed app headers are not the app's now
    ("cache=HIT&outcome=filled&lock_wait_ns=99&version=3&age=4", "hit",
     {"cache_status": "HIT", "age_s": 4, "lock_wait_ns": 0, "version_served": -1}),
    ("cache=revalidated", "hit", {"cache_status": "REVALIDATED"}),
    ("cache=UPDATING&outcome=filled", "stale", {"cache_status": "UPDATING"}),
    ("cache=grace&outcome=filled", "stale", {"cache_status": "GRACE"}),
    ("cache=pass", "answered", {"cache_status": "PASS"}),  # no outcome header: answered
    ("version=3", "answered", {"version_served": 3}),
])
def test_the_responses_headers_give_the_rows_meaning(
        http_service: str, services: Services, query: str, outcome: str,
        fields: dict[str, Any]) -> None:
    rows = run(http_spec(HttpTarget.parse(http_service + ECHO + query), clients=2), services)
    assert only(rows, "outcome") == {outcome}, only(rows, "error")
    for name, value in fields.items():
        assert only(rows, name) == {value}, name
    assert only(rows, "http_status") == {200} and only(rows, "origin_called") == {0}


@pytest.mark.parametrize(("path", "error", "status"), [
    (ECHO + "status=503&error=LockWaitTimeout:%20gave%20up",
     "HttpStatusError: 503 Service Unavailable (from LockWaitTimeout: gave up)", 503),
    ("/headers/{key}?status=404", "HttpStatusError: 404 Not Found", 404),
    (ECHO + "outcome=maybe", "AppHeaderError: X-Stampede-Outcome 'maybe' is not one of "
                             "hit|stale|filled|waited", 200),
    ("/reset/{key}", "ConnectionResetError", 0),
])
def test_failures_are_error_rows_of_their_type(http_service: str, services: Services, path: str,
                                               error: str, status: int) -> None:
    rows = run(http_spec(HttpTarget.parse(http_service + path), clients=2, seconds=0.3), services)
    assert only(rows, "outcome") == {"error"}
    assert all(e.startswith(error) for e in rows["error"].to_pylist()), only(rows, "error")
    assert only(rows, "http_status") == {status}


def test_a_target_nobody_serves_is_error_rows_not_a_hang(services: Services) -> None:
    target = HttpTarget.parse("http://127.0.0.1:9/k/{key}", connect_ms=100)
    started = time.monotonic()
    rows = run(http_spec(target, clients=2, seconds=0.3), services)
    assert time.monotonic() - started < 10
    assert only(rows, "outcome") == {"error"}
    assert all(e.startswith("ConnectionRefusedError") for e in rows["error"].to_pylist())


@pytest.mark.parametrize(("change", "says"), [
    ({"workload": workload(bypass=(0.5,))}, "cannot bypass"),
    ({"workload": workload(invalidate_rate=1.0)}, "no origin writer"),
    ({"http": {"scheme": "http", "host": "127.0.0.1", "port": 80,
               "path_template": "/k/{key} HTTP/1.1\r\nX-Injected: 1"}}, "path"),
    ({"http": {"scheme": "http", "host": "127.0.0.1", "port": 80, "path_template": "/k/{key}",
               "headers": [["X-A", "v\r\nX-Injected: 1"]]}}, "control character"),
    ({"http": {"scheme": "gopher", "host": "127.0.0.1", "port": 80,
               "path_template": "/{key}"}}, "scheme"),
    ({"http": {"scheme": "http", "host": "127.0.0.1", "port": 80, "path_template": "/{key}",
               "extra": 1}}, "unknown fields"),
    ({"http": "http://127.0.0.1/{key}"}, "http must be dict"),
])
def test_the_worker_refuses_an_http_task_it_cannot_run(change: dict[str, Any], says: str) -> None:
    data = http_spec(HttpTarget.parse("http://127.0.0.1:8080/k/{key}")).to_json() | change
    with pytest.raises(InvalidTaskArguments, match=says):
        TrialSpec.from_json(data)


@needs_nginx
def test_a_failed_request_keeps_nothing_of_the_last_response() -> None:
    """The HTTP fields are not reset per request (other trials never pay for them): the fetch
    sets all four on every request, a failed one too."""
    server = start_nginx()
    fetch = HttpFetch(HttpTarget.parse(server.base + "/k/{key}", connect_ms=200))
    probe = Probe()
    try:
        assert fetch("k", probe) is Outcome.ANSWERED and probe.http_status == 200
        server.stop()
        probe.reset()
        with pytest.raises(ConnectionError):  # the closed connection, then a refused connect
            fetch("k", probe)
        assert (probe.http_status, probe.http_bytes, probe.cache_status, probe.age_s) == (0, 0, 0, -1)
    finally:
        fetch.close()
        server.stop()
