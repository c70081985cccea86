"""The client threads' request over HTTP (an HTTP trial, issue 32): a ``Fetch`` like a
strategy's, on each thread's own keep-alive connection (model.http), and what a response means.

What a response means, written into the row (the app tier sends the ``X-Stampede-*`` headers;
nginx and Varnish replay a cached response's headers, so the cache's own word wins):
- ``X-Cache-Status`` HIT or REVALIDATED: ``hit``; STALE, UPDATING or GRACE: ``stale``; the
  probe's app fields stay unset (the headers are a replay of the response that filled it);
- otherwise the app's ``X-Stampede-Outcome`` (hit, stale, filled, waited) and its measurements
  (``X-Stampede-Lock-Wait-Ns``, ``-Stale-Age-Ns``, ``-Local-Hit``, ``-Version``, ``-Fallback``);
- no outcome header at all: ``answered`` (a value came back; the server did not say how).
``origin_called`` stays 0: in the HTTP modes the app tier records its own rows of the origin
calls it makes, so a client row never counts one (no double count).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Mapping

from model.http.client import Connections, HttpConnection
from model.http.response import AGE_NONE, CacheStatus, HttpStatusError, Response
from model.http.target import HttpTarget
from strategies import Outcome, Probe

# The HTTP cache answered from its copy: the cache's word is the outcome.
CACHED = {CacheStatus.HIT: Outcome.HIT, CacheStatus.REVALIDATED: Outcome.HIT,
          CacheStatus.STALE: Outcome.STALE, CacheStatus.UPDATING: Outcome.STALE,
          CacheStatus.GRACE: Outcome.STALE}
APP_OUTCOMES = {"hit": Outcome.HIT, "stale": Outcome.STALE, "filled": Outcome.FILLED,
                "waited": Outcome.WAITED}
OUTCOME_HEADER = "x-stampede-outcome"
# The app's measurements: header -> (probe field, lowest value allowed)
APP_FIELDS = {"x-stampede-lock-wait-ns": ("lock_wait_ns", 0),
              "x-stampede-stale-age-ns": ("stale_age_ns", 0),
              "x-stampede-local-hit": ("local_hit", 0),
              "x-stampede-version": ("version_served", -1),
              "x-stampede-fallback": ("fallback", 0)}
FLAGS = frozenset({"local_hit", "fallback"})  # 0 or 1


class AppHeaderError(ValueError):
    """An ``X-Stampede-*`` header whose value the app tier's contract does not allow."""


def _noted(response: Response | None, probe: Probe) -> None:
    """The response's fields in the probe (None: a request that got none: the fields' nones)."""
    if response is None:
        probe.http_status, probe.http_bytes, probe.cache_status, probe.age_s = 0, 0, 0, AGE_NONE
        return
    probe.http_status = response.status
    probe.http_bytes = response.body_bytes
    probe.cache_status = response.cache_status
    probe.age_s = response.age_s


def note_failure(exc: BaseException, probe: Probe) -> None:
    """A GET that raised: a status error's response fields in the row; no response, none of
    the last request's fields stay."""
    _noted(exc.response if isinstance(exc, HttpStatusError) else None, probe)


def meaning(response: Response, probe: Probe) -> Outcome:
    """The row's outcome and fields for ``response`` (see the module docstring)."""
    probe.http_status = response.status
    probe.http_bytes = response.body_bytes
    probe.cache_status = cache = response.cache_status
    probe.age_s = response.age_s
    if not cache:  # no HTTP cache's word (a static server's response: two tests)
        return Outcome.ANSWERED if not response.headers else _from_app(response.headers, probe)
    cached = CACHED.get(cache)
    if cached is not None:
        return cached
    return _from_app(response.headers, probe) if response.headers else Outcome.ANSWERED


def _from_app(headers: Mapping[str, str], probe: Probe) -> Outcome:
    """The app's word and measurements (its X-Stampede-* headers)."""
    _app_fields(headers, probe)
    word = headers.get(OUTCOME_HEADER)
    if word is None:
        return Outcome.ANSWERED
    outcome = APP_OUTCOMES.get(word.lower())
    if outcome is None:
        raise AppHeaderError(f"X-Stampede-Outcome {word[:40]!r} is not one of "
                             f"{'|'.join(APP_OUTCOMES)}")
    return outcome


def _app_fields(headers: Mapping[str, str], probe: Probe) -> None:
    for header, (name, lowest) in APP_FIELDS.items():
        text = headers.get(header)
        if text is None:
            continue
        try:
            value = int(text)
        except ValueError:
            value = lowest - 1
        if value < lowest or (name in FLAGS and value > 1):
            raise AppHeaderError(f"{header} {text[:40]!r} is not a whole number >= {lowest}"
                                 + (" (0 or 1)" if name in FLAGS else ""))
        setattr(probe, name, value)


class HttpFetch:
    """``Fetch`` for an HTTP trial: GET the target for the key on the calling thread's own
    connection; a status of 400 or above raises (its status and bytes kept in the row)."""

    def __init__(self, target: HttpTarget) -> None:
        self.target = target
        self.connections = Connections(target)
        self._mine = threading.local()  # this thread's connection, one attribute away

    def connect(self) -> None:
        """Open the calling client thread's connection before the start instant (a synchronized
        start must not pay a TCP and TLS handshake per thread). A server that does not answer
        now is not skipped: the thread's first GET connects again, its failure an error row."""
        conn = self._mine.conn = self.connections.mine()
        with contextlib.suppress(OSError):
            conn.connect()

    def __call__(self, key: str, probe: Probe) -> Outcome:
        try:
            conn: HttpConnection = self._mine.conn
        except AttributeError:  # a thread that did not connect first
            conn = self._mine.conn = self.connections.mine()
        try:
            response = conn.get(key)
        except BaseException as exc:
            note_failure(exc, probe)
            raise
        return meaning(response, probe)

    def close(self) -> None:
        self.connections.close()


def floor_round_trip(target: HttpTarget) -> tuple[HttpConnection, bytes]:
    """A connection of its own and the floor path's GET: one sequential round trip each."""
    assert target.floor_path is not None
    conn = HttpConnection(target)
    return conn, conn.requests.path(target.floor_path)
