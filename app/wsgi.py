"""The app tier's WSGI application: ``/t/<run_id>/<trial>/<key>`` answered by the trial's
strategy (app.trial), ``/stampede/floor`` at once (the floor of a request to the tier).

The response carries what the strategy did (model.apptier.Header): the client's row is the
request, the app's own row the origin call. A failed request is a 500 with the error's text in
``X-Stampede-Error``, never a fast 200; an unknown trial or key is a 404, a process that is not
part of the trial a 503 (both error rows on the client).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import Any

from app.control import Control
from app.trial import Answer, AppTrial, UnknownKey
from model import apptier
from model.apptier import Header
from model.services import Services
from strategies import Outcome

StartResponse = Callable[[str, list[tuple[str, str]]], Any]
_control: list[Control[AppTrial]] = []  # this process's, once started (app.serve, at import)
_NO_STORE = ("Cache-Control", "no-store")
ANSWERED = {Outcome.HIT: "hit", Outcome.STALE: "stale", Outcome.FILLED: "filled",
             Outcome.WAITED: "waited"}


def start_control(threads: int | None = None) -> Control[AppTrial]:
    """This process's control thread (once): the broker and services from the environment."""
    if not _control:
        count = threads or int(os.environ.get(apptier.APP_ENV["threads"], "1"))
        control = Control(Services.from_env(), count, AppTrial)
        control.start()
        _control.append(control)
    return _control[0]


def stop_control() -> None:
    while _control:
        _control.pop().stop()


def application(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
    path = str(environ.get("PATH_INFO", ""))
    if path == apptier.FLOOR_PATH:
        start_response("204 No Content", [_NO_STORE])
        return []
    if path == apptier.HEALTH_PATH:
        return _plain(start_response, "200 OK", b"ok\n" if _control else b"starting\n")
    named = apptier.parse_path(path)
    if named is None:
        return _plain(start_response, "404 Not Found", b"no such path\n")
    run_id, number, key = named
    trial = start_control().trial(run_id, number)
    if trial is None:
        return _plain(start_response, "503 Service Unavailable",
                      f"trial {run_id}:{number} is not served by this process\n".encode())
    prime = environ.get("HTTP_" + Header.PRIME.upper().replace("-", "_")) == "1"
    try:
        answer = trial.serve(key, record=not prime)
    except UnknownKey:
        return _plain(start_response, "404 Not Found", f"no key {key!r} in this trial\n".encode())
    return _respond(start_response, trial, answer)


def _respond(start_response: StartResponse, trial: AppTrial,
             answer: Answer) -> Iterable[bytes]:
    probe = answer.probe
    headers = [(Header.APP.value, _control[0].node if _control else ""),
               (Header.LOCK_WAIT_NS.value, str(probe.lock_wait_ns)),
               (Header.STALE_AGE_NS.value, str(probe.stale_age_ns)),
               (Header.LOCAL_HIT.value, str(probe.local_hit)),
               (Header.VERSION.value, str(probe.version_served)),
               (Header.FALLBACK.value, str(probe.fallback))]
    if answer.error is not None:
        headers += [(Header.ERROR.value, header_text(answer.error)), _NO_STORE]
        return _plain(start_response, "500 Internal Server Error", b"error\n", headers)
    headers.append((Header.OUTCOME.value, ANSWERED[answer.outcome]))
    headers.append(("Cache-Control", f"max-age={trial.max_age_s()}") if trial.front
                   else _NO_STORE)
    headers += [("Content-Type", "application/octet-stream"),
                ("Content-Length", str(len(answer.body)))]
    start_response("200 OK", headers)
    return [answer.body]


def header_text(text: str) -> str:
    """An error's text as a header value: one line, printable."""
    return "".join(c if c.isprintable() else " " for c in text)[:200]


def _plain(start_response: StartResponse, status: str, body: bytes,
           headers: list[tuple[str, str]] | None = None) -> Iterable[bytes]:
    start_response(status, [*(headers or [_NO_STORE]), ("Content-Type", "text/plain"),
                            ("Content-Length", str(len(body)))])
    return [body]
