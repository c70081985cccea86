"""The expiry listener on a real cache: it hears the server's own expiry reports, stamps them on
time, and says when a server will not report (a user without CONFIG, as managed services are)."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from coordinator.expiry import ExpiryListener
from coordinator.stack.redis_server import start_redis
from results.figures.expiry_reports import Source


@pytest.fixture
def listener(redis_server: Callable[[str], str]) -> Iterator[tuple[ExpiryListener, redis.Redis]]:
    url = redis_server("expiry-cache")
    client = redis.Redis.from_url(url)
    client.config_set("notify-keyspace-events", "")  # as a fresh server has it
    found = ExpiryListener(url, client)
    found.start()
    yield found, client
    found.close()
    client.close()


def test_reports_each_expiry_and_delete_of_the_watched_keys_on_time(
        listener: tuple[ExpiryListener, redis.Redis]) -> None:
    found, client = listener
    assert found.unavailable is None
    assert found.priority in ("fifo", "nice -10", "normal")
    start = time.time_ns()
    expire_at_ms = start // 1_000_000 + 300
    client.set("orders:0", b"v", pxat=expire_at_ms)
    client.set("other:9", b"v", pxat=expire_at_ms)  # not a key of the trial
    client.set("orders:1", b"v")
    time.sleep(0.35)
    assert client.get("orders:0") is None  # the access makes the server notice at once
    client.delete("orders:1")
    time.sleep(0.2)
    events = found.events({"orders:0", "orders:1"}, start, time.time_ns())
    assert sorted((e.key, e.source) for e in events) == [
        ("orders:0", Source.EXPIRED), ("orders:1", Source.DELETED)]
    expired = next(e for e in events if e.source is Source.EXPIRED)
    assert 0 <= expired.at_ns - expire_at_ms * 1_000_000 < 100_000_000, expired
    assert not found.missed(start, time.time_ns())


def test_a_server_that_refuses_config_is_said_to_and_not_listened_to(
        redis_server: Callable[[str], str]) -> None:
    url = redis_server("expiry-cache")
    admin = redis.Redis.from_url(url)
    admin.acl_setuser("limited", enabled=True, passwords=["+pw-limited"], keys=["*"],
                      channels=["*"], commands=["+@all", "-config"])
    limited_url = url.replace("redis://", "redis://limited:pw-limited@")
    limited = redis.Redis.from_url(limited_url)
    try:
        found = ExpiryListener(limited_url, limited)
        assert found.unavailable is not None and "refused CONFIG" in found.unavailable
        found.start()  # does nothing: the trial falls back to the schedule
        assert found.events({"orders:0"}, 0, time.time_ns()) == []
        found.close()
    finally:
        limited.close()
        admin.acl_deluser("limited")
        admin.close()


def test_reports_again_after_the_cache_restarts_without_its_notification_config(
        tmp_path: Path) -> None:
    """A killed and restarted server (``cache:kill@S+D``) comes back with notifications off:
    the listener turns them on again when it resubscribes, so later expiries are still heard."""
    proc, url = start_redis("restarted-cache", tmp_path)
    client = redis.Redis.from_url(url)
    found = ExpiryListener(url, client)
    found.start()
    try:
        start = time.time_ns()
        proc.signal(signal.SIGKILL)
        proc.popen.wait(5)
        proc.restart()
        proc.wait_until(lambda: _answers(client), 10, "answering PING after a restart")
        deadline = time.monotonic() + 5
        while "E" not in str(client.config_get("notify-keyspace-events")) and time.monotonic() < deadline:
            time.sleep(0.05)
        client.set("orders:0", b"v", px=100)
        time.sleep(0.25)
        assert client.get("orders:0") is None
        time.sleep(0.2)
        events = found.events({"orders:0"}, start, time.time_ns())
        assert [(e.key, e.source) for e in events] == [("orders:0", Source.EXPIRED)]
        assert found.missed(start, time.time_ns())  # the gap itself is still said
    finally:
        found.close()
        client.close()
        proc.stop()


def _answers(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False
