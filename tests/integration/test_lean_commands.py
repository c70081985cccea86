"""The two command paths against a real server: the same replies and the same failures.

The strategy tests run on both paths (the ``commands`` fixture); these pin what the lean path
adds: a connection per thread, kept; replies as the plain client gives them; an error reply in a
pipeline that leaves the connection in step; a lost script loaded again; a connection the server
dropped replaced as the pool replaces it; no more connections than the bound.
"""

from __future__ import annotations

import socket
import struct
import threading
import time

import pytest
import redis
import redis.exceptions as rex

import model.lean as lean_module
from model.lean import IDLE_CHECK_S, LeanCommands
from strategies.commands import Commands, PlainCommands, set_command
from tests.strategy_helpers import MakeCommands


def test_every_command_replies_as_the_plain_client_does(cache: redis.Redis,
                                                        commands: MakeCommands) -> None:
    c = commands(cache)
    assert c.get("k") is None
    assert c.set("k", b"v", px=60_000) is True
    assert c.set("k", b"other", px=60_000, nx=True) is False  # NX: not stored
    assert c.get("k") == b"v"
    assert 0 < c.pttl("k") <= 60_000
    assert c.set("at", b"w", pxat=int(time.time() * 1000) + 60_000) is True
    assert c.delete("k", "at", "absent") == 2
    assert c.rpush("list", b"1") == 1
    assert c.blpop("list", 0.5) == b"1"
    assert c.blpop("list", 0.05) is None
    c.pipeline(set_command("p", b"x", px=60_000), ("PUBLISH", "chan", "p"))
    c.pipeline(("DEL", "p"), set_command("p", b"y"), transaction=True)
    assert cache.get("p") == b"y"
    script = c.script("return {tonumber(ARGV[1]) + 1, redis.call('get', KEYS[1])}")
    assert script(["p"], [41]) == [42, b"y"]
    cache.script_flush()  # a restarted server forgot it: loaded again, as redis-py's Script does
    assert script(["p"], [1]) == [2, b"y"]


def test_an_error_reply_in_a_pipeline_is_raised_and_the_connection_stays_in_step(
        cache: redis.Redis, commands: MakeCommands) -> None:
    c = commands(cache)
    cache.rpush("a-list", b"1")
    with pytest.raises(rex.ResponseError, match="WRONGTYPE"):
        c.pipeline(("GET", "a-list"), set_command("after", b"2"))
    assert cache.get("after") == b"2"  # the commands after the error still ran
    assert c.get("after") == b"2"  # and the next reply is this command's own


def test_a_get_reads_hiredis_directly_and_stays_in_step(cache: redis.Redis,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A GET's reply comes off hiredis's reader without the parser's ``read_response`` (the
    frames benchmark 1 found in the way: model.lean ``_get_round_trip``); a value, a miss and
    an error reply each as before, and the connection in step after each."""
    from redis._parsers.hiredis import _HiredisParser

    lean = LeanCommands.from_url(_url(cache), 8)
    try:
        cache.set("k", b"v")
        cache.rpush("a-list", b"1")
        lean.connect()

        def not_here(*_: object, **__: object) -> None:
            raise AssertionError("a GET went through the parser's read_response")

        monkeypatch.setattr(_HiredisParser, "read_response", not_here)
        assert lean.get("k") == b"v"
        assert lean.get("absent") is None
        with pytest.raises(rex.ResponseError, match="WRONGTYPE"):
            lean.get("a-list")
        assert lean.get("k") == b"v"
    finally:
        lean.close()


def client_id(c: Commands) -> int:
    assert isinstance(c, LeanCommands)
    return int(c.call("CLIENT", "ID"))


def test_each_thread_keeps_one_connection_of_its_own(cache: redis.Redis) -> None:
    lean = LeanCommands.from_url(_url(cache), 8)
    try:
        mine = client_id(lean)
        assert client_id(lean) == mine
        theirs: list[int] = []
        thread = threading.Thread(target=lambda: theirs.append(client_id(lean)))
        thread.start()
        thread.join(10)
        assert theirs and theirs[0] != mine
    finally:
        lean.close()


def test_more_threads_than_the_bound_fail_at_once_and_loudly(cache: redis.Redis) -> None:
    lean = LeanCommands.from_url(_url(cache), 1)
    try:
        lean.get("k")
        failed: list[BaseException] = []

        def other() -> None:
            try:
                lean.get("k")
            except rex.MaxConnectionsError as exc:
                failed.append(exc)

        thread = threading.Thread(target=other)
        thread.start()
        thread.join(10)
        assert len(failed) == 1
    finally:
        lean.close()


def test_a_connection_the_server_dropped_while_idle_is_replaced(cache: redis.Redis) -> None:
    """What the pool's checkout does (a restarted lock store between two misses)."""
    lean = LeanCommands.from_url(_url(cache), 8)
    try:
        cache.set("k", b"v")
        cache.client_kill_filter(_id=client_id(lean))
        time.sleep(IDLE_CHECK_S * 1.5)
        assert lean.get("k") == b"v"
    finally:
        lean.close()


def test_a_connection_dropped_under_a_busy_thread_fails_one_request_then_reconnects(
        cache: redis.Redis) -> None:
    lean = LeanCommands.from_url(_url(cache), 8)
    try:
        cache.set("k", b"v")
        cache.client_kill_filter(_id=client_id(lean))
        with pytest.raises(redis.ConnectionError):
            lean.get("k")
        assert lean.get("k") == b"v"
    finally:
        lean.close()


def test_a_lean_connection_blocks_with_the_kernels_timeout(cache: redis.Redis) -> None:
    """No Python timeout on the socket (it would poll before every send and recv): the pool's
    ``socket_timeout`` is the kernel's SO_RCVTIMEO and SO_SNDTIMEO, and still so after the idle
    check's zero-timeout read (redis-py restores the socket's timeout after it)."""
    client = redis.Redis.from_url(_url(cache), socket_timeout=0.3)
    lean = LeanCommands(client.connection_pool, 8)
    try:
        assert lean.get("k") is None
        conn = lean._conn()
        for _ in range(2):
            sock = conn._sock
            assert sock is not None and sock.gettimeout() is None
            for option in (socket.SO_RCVTIMEO, socket.SO_SNDTIMEO):
                assert struct.unpack("ll", sock.getsockopt(socket.SOL_SOCKET, option, 16)) == (
                    0, 300_000)
            lean_module._ready(conn)  # can_read(timeout=0), then the socket's own again
    finally:
        lean.close()
        client.close()


@pytest.mark.parametrize("op", ["get", "pttl", "pipeline"])
def test_a_lean_command_the_server_does_not_answer_is_redis_pys_timeout(
        cache: redis.Redis, op: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernel's timeout (EAGAIN) in redis-py's words on each of the lean path's ways to the
    socket: a GET's own, a command through the parser, a pipeline; the connection closed."""
    monkeypatch.setattr(lean_module, "IDLE_CHECK_S", 60.0)
    client = redis.Redis.from_url(_url(cache), socket_timeout=0.3)
    lean = LeanCommands(client.connection_pool, 8)
    run = {"get": lambda: lean.get("k"), "pttl": lambda: lean.pttl("k"),
           "pipeline": lambda: lean.pipeline(("PTTL", "k"))}[op]
    try:
        run()
        cache.execute_command("CLIENT", "PAUSE", 1000, "ALL")
        with pytest.raises(redis.TimeoutError, match=r"^Timeout reading from socket$"):
            run()
        assert not lean._conn().is_connected
    finally:
        cache.execute_command("CLIENT", "UNPAUSE")
        lean.close()
        client.close()


@pytest.mark.parametrize("path", ["pooled", "lean"])
def test_a_server_that_stops_answering_times_out_then_the_next_command_reconnects(
        cache: redis.Redis, path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A paused server: redis-py's TimeoutError after the socket timeout on either path (the
    lean path reads redis-py's parser on the connection's socket itself), the connection
    closed, and the command after the pause answered on a new one. The idle check is pushed
    out of the way: the failure itself must close the connection."""
    monkeypatch.setattr(lean_module, "IDLE_CHECK_S", 60.0)
    client = redis.Redis.from_url(_url(cache), socket_timeout=0.3)
    commands: Commands = PlainCommands(client) if path == "pooled" else LeanCommands(
        client.connection_pool, 8)
    try:
        cache.set("k", b"v")
        assert commands.get("k") == b"v"
        cache.execute_command("CLIENT", "PAUSE", 1500, "ALL")
        started = time.monotonic()
        with pytest.raises(redis.TimeoutError, match="Timeout reading from"):
            commands.get("k")
        assert 0.25 <= time.monotonic() - started < 1.2
        time.sleep(1.5)
        cache.set("k", b"w")  # a connection kept in use would read the late reply: b"v"
        assert commands.get("k") == b"w"
    finally:
        cache.execute_command("CLIENT", "UNPAUSE")
        commands.close()


def _url(client: redis.Redis) -> str:
    kwargs = client.connection_pool.connection_kwargs
    return f"redis://{kwargs['host']}:{kwargs['port']}/{kwargs.get('db', 0)}"
