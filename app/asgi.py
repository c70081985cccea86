"""The app tier's ASGI application (``--app-kind asgi``): the WSGI app's URLs and headers
(model.apptier), answered by coroutines of one event loop per process (app.aio_trial).

Served by uvicorn on uvloop with httptools (app/__main__.py), ``STAMPEDE_APP_PROCESSES``
processes; ``STAMPEDE_APP_THREADS`` is, here, the requests in flight a process's connection
pools are sized for. The process's control thread (app.control, the WSGI app's) starts in the
lifespan's startup, once the loop runs: it builds each published trial inside that loop.
"""

from __future__ import annotations

import asyncio
import functools
import os
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import redis

from app.aio_trial import AsyncAppTrial, open_trial
from app.control import Control
from app.trial import Answer, UnknownKey
from app.wsgi import ANSWERED, header_text
from model import apptier
from model.apptier import AppTrialSpec, Header
from model.services import Services

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
_control: list[Control[AsyncAppTrial]] = []  # this process's, once its loop started
_NO_STORE = (b"cache-control", b"no-store")
_PRIME = Header.PRIME.value.lower().encode()


def start_control(loop: asyncio.AbstractEventLoop, threads: int | None = None) -> None:
    """This process's control thread (once), building its trials inside ``loop``."""
    if _control:
        return
    count = threads or int(os.environ.get(apptier.APP_ENV["threads"], "1"))

    def opener(spec: AppTrialSpec, sender: int, services: Services,
               broker: redis.Redis) -> AsyncAppTrial:
        return open_trial(spec, sender, services, broker, loop)

    control = Control(Services.from_env(), count, opener, kind="asgi")
    control.start()
    _control.append(control)


def stop_control() -> None:
    while _control:
        _control.pop().stop()


async def application(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] == "lifespan":
        await _lifespan(receive, send)
        return
    if scope["type"] == "http":
        await _http(scope, send)


async def _http(scope: Scope, send: Send) -> None:
    path = str(scope.get("path", ""))
    if path == apptier.FLOOR_PATH:
        await _send(send, 204, [_NO_STORE], b"")
        return
    if path == apptier.HEALTH_PATH:
        await _plain(send, 200, b"ok\n" if _control else b"starting\n")
        return
    named = apptier.parse_path(path)
    if named is None:
        await _plain(send, 404, b"no such path\n")
        return
    run_id, number, key = named
    trial = _control[0].trial(run_id, number) if _control else None
    if trial is None:
        await _plain(send, 503, f"trial {run_id}:{number} is not served by this process\n".encode())
        return
    prime = any(name == _PRIME and value == b"1" for name, value in scope.get("headers", ()))
    try:
        answer = await trial.serve(key, record=not prime)
    except UnknownKey:
        await _plain(send, 404, f"no key {key!r} in this trial\n".encode())
        return
    await _respond(send, answer)


async def _respond(send: Send, answer: Answer) -> None:
    probe = answer.probe
    node = _control[0].node if _control else ""
    headers = [(Header.APP.value, node), (Header.LOCK_WAIT_NS.value, str(probe.lock_wait_ns)),
               (Header.STALE_AGE_NS.value, str(probe.stale_age_ns)),
               (Header.LOCAL_HIT.value, str(probe.local_hit)),
               (Header.VERSION.value, str(probe.version_served)),
               (Header.FALLBACK.value, str(probe.fallback))]
    encoded = [(k.lower().encode(), v.encode()) for k, v in headers]
    if answer.error is not None:
        encoded.append((Header.ERROR.value.lower().encode(), header_text(answer.error).encode()))
        await _plain(send, 500, b"error\n", [*encoded, _NO_STORE])
        return
    encoded += [(Header.OUTCOME.value.lower().encode(), ANSWERED[answer.outcome].encode()),
                _NO_STORE, (b"content-type", b"application/octet-stream")]
    await _send(send, 200, encoded, answer.body)


async def _plain(send: Send, status: int, body: bytes,
                 headers: list[tuple[bytes, bytes]] | None = None) -> None:
    await _send(send, status, [*(headers or [_NO_STORE]), (b"content-type", b"text/plain")], body)


async def _send(send: Send, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
    headers.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _lifespan(receive: Receive, send: Send) -> None:
    """Startup: the control thread, on this loop; shutdown: its trials finished (their rows
    shipped) from a thread, while the loop still runs their closing."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            try:
                await asyncio.to_thread(functools.partial(start_control,
                                                          asyncio.get_running_loop()))
            except Exception as exc:  # noqa: BLE001 - told to the server, which exits
                await send({"type": "lifespan.startup.failed", "message": str(exc)})
                return
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await asyncio.to_thread(stop_control)
            await send({"type": "lifespan.shutdown.complete"})
            return
