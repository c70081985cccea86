"""Every coordinator connection gives up connecting after ``defaults.CONNECT_TIMEOUT_S``.

The peer is a loopback listener whose accept queue is full: the kernel drops further SYNs, as a
host that is gone or firewalled does, so a connect without a timeout waits for good. Each call
runs in a thread; the test waits at most the timeout plus a margin for each to fail.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from coordinator import defaults
from coordinator.faults.origin_holds import exhaust_origin, lock_orders
from coordinator.origin.calibrate import median_query_ms
from coordinator.origin.counters import origin_db_calls, statement_snapshot
from coordinator.origin.seed import count_rows, require_orders
from coordinator.provenance import versions
from coordinator.trials.dispatch import client_app
from model.services import Services

TIMEOUT_S = 2  # libpq's shortest
MARGIN_S = 3.0


@pytest.fixture
def unanswered_port() -> Iterator[int]:
    """A loopback port that never completes a connection (its accept queue is full)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = int(listener.getsockname()[1])
    fillers = []
    for _ in range(3):
        filler = socket.socket()
        filler.setblocking(False)
        with contextlib.suppress(BlockingIOError):  # completes in the background
            filler.connect(("127.0.0.1", port))
        fillers.append(filler)
    time.sleep(0.1)
    probe = socket.create_connection  # the premise: a plain connect really is not answered
    with pytest.raises(TimeoutError):
        probe(("127.0.0.1", port), timeout=0.3)
    yield port
    listener.close()  # a hung connect (the test failed) now meets a closed port and ends
    for filler in fillers:
        filler.close()


def test_every_coordinator_connection_times_out(unanswered_port: int,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(defaults, "CONNECT_TIMEOUT_S", TIMEOUT_S)
    dsn = f"postgresql://postgres@127.0.0.1:{unanswered_port}/postgres"
    url = f"redis://127.0.0.1:{unanswered_port}/0"
    services = Services(url, url, url, dsn)
    app = client_app(url)
    calls: dict[str, Callable[[], object]] = {
        "pg_stat_statements calls": lambda: origin_db_calls(dsn),
        "pg_stat_statements snapshot": lambda: statement_snapshot(dsn),
        "require_orders": lambda: require_orders(dsn),
        "count_rows": lambda: count_rows(dsn, "orders"),
        "calibration": lambda: median_query_ms(dsn, 3600.0, samples=3),
        "origin:lock": lambda: lock_orders(dsn),
        "origin:exhaust": lambda: exhaust_origin(dsn),
        "provenance (cache, origin)": lambda: versions(services),
        "celery broker ping": lambda: app.control.ping(timeout=0.5),
    }
    outcome: dict[str, BaseException | None] = {}

    def attempt(name: str, call: Callable[[], object]) -> None:
        try:
            call()
            outcome[name] = None
        except BaseException as exc:  # noqa: BLE001 - asserted below
            outcome[name] = exc

    threads = [threading.Thread(target=attempt, args=item, daemon=True) for item in calls.items()]
    t0 = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(max(0.0, t0 + TIMEOUT_S + MARGIN_S - time.monotonic()))
    hung = sorted(set(calls) - set(outcome))
    assert not hung, f"no connect timeout: {hung} still connecting after {TIMEOUT_S + MARGIN_S} s"
    app.close()
    for name, exc in outcome.items():
        assert exc is not None, f"{name} connected to a port that never answers"
        assert "timeout" in str(exc).lower() or "timed out" in str(exc).lower(), (name, exc)
