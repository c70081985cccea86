"""What one HTTP GET brought back, and the errors a response (or its absence) raises.

A status of 400 or above is an ``HttpStatusError`` (its type is the error row's type), with the
app tier's own error (its ``X-Stampede-Error`` header, ``Type: message``) appended the way
``strategies.base.error_text`` names a wrapped cause. The headers kept are the few the app tier
and the HTTP caches send to say how the request was answered; everything else is parsed and
dropped.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType

import httptools

AGE_NONE = -1  # no Age header
STAMPEDE_HEADER = b"x-stampede-"  # the app tier's headers: kept, lower-case names


class CacheStatus(enum.IntEnum):
    """An HTTP cache's word on a response (header ``X-Cache-Status``): nginx's
    ``$upstream_cache_status`` values, and what Varnish's VCL sends (hit, miss, grace, pass)."""

    NONE = 0  # no such header: no HTTP cache in the way, or it said nothing
    HIT = 1
    MISS = 2
    EXPIRED = 3
    STALE = 4
    UPDATING = 5
    REVALIDATED = 6
    BYPASS = 7
    GRACE = 8
    PASS = 9

    @classmethod
    def of(cls, word: bytes) -> CacheStatus:
        """The status a header value names, any case; an unknown word is NONE (the row keeps
        the meaning it can prove: a value came back)."""
        return _BY_WORD.get(word.strip().upper(), cls.NONE)

    @property
    def word(self) -> str:
        """As the row's ``cache_status`` column holds it: nginx's word, '' for NONE."""
        return "" if self is CacheStatus.NONE else self.name


_BY_WORD = {s.name.encode(): s for s in CacheStatus if s is not CacheStatus.NONE}
CACHE_STATUS_WORDS = tuple(s.word for s in sorted(CacheStatus))  # by code: the column's dictionary


NO_HEADERS: Mapping[str, str] = MappingProxyType({})


class Response:
    """One response: status, body and its length, the cache's word, Age, and the kept headers
    (lower-case names: ``x-stampede-*``). ``raw`` is the response as received, its head ending
    at ``end``: the body and the reason phrase are cut from it only when asked for (a row needs
    the body's length alone, and a cached value can be megabytes)."""

    __slots__ = ("_body", "_end", "_raw", "age_s", "body_bytes", "cache_status", "headers",
                 "status")

    def __init__(self, status: int, raw: bytes, end: int,
                 cache_status: CacheStatus = CacheStatus.NONE, age_s: int = AGE_NONE,
                 headers: Mapping[str, str] = NO_HEADERS, body: bytes | None = None) -> None:
        self.status, self._raw, self._end, self._body = status, raw, end, body
        self.body_bytes = len(raw) - end - 4 if body is None else len(body)
        self.cache_status, self.age_s, self.headers = cache_status, age_s, headers

    @property
    def body(self) -> bytes:
        """The body (``body`` given: a chunked response's, decoded)."""
        return self._raw[self._end + 4:] if self._body is None else self._body

    @property
    def reason(self) -> str:
        """The status line's reason phrase (after ``HTTP/1.1 200 ``)."""
        return self._raw[13:self._raw.find(b"\r\n")].decode("latin-1")

    def __repr__(self) -> str:
        return (f"Response({self.status} {self.reason}, {self.body_bytes} bytes, "
                f"{self.cache_status.name}, age {self.age_s})")


class HttpStatusError(RuntimeError):
    """The server answered with a status of 400 or above (the response is kept: its status and
    size go into the error row)."""

    def __init__(self, message: str, response: Response | None = None) -> None:
        super().__init__(message)
        self.response = response

    @classmethod
    def of(cls, response: Response) -> HttpStatusError:
        text = f"{response.status} {response.reason}".strip()
        if cause := response.headers.get("x-stampede-error"):
            text += f" (from {cause})"
        return cls(text, response)


class ResponseIncomplete(ConnectionError):
    """The server closed the connection before the whole response arrived."""


class HttpProtocolError(ConnectionError):
    """The server's bytes are not an HTTP/1.1 response (the connection cannot be trusted)."""


class _Body:
    """A parser's protocol that keeps the body (a chunked response's, decoded)."""

    def __init__(self) -> None:
        self.pieces: list[bytes] = []

    def on_body(self, body: bytes) -> None:
        self.pieces.append(body)


def dechunked(raw: bytes) -> bytes:
    """The body of a response sent with Transfer-Encoding (already validated by the parser)."""
    keeper = _Body()
    httptools.HttpResponseParser(keeper).feed_data(raw)
    return b"".join(keeper.pieces)


def scanned(status: int, raw: bytes, end: int, lower: bytes) -> Response:
    """A response whose head holds X-Cache-Status, Age, X-Stampede-* or Transfer-Encoding."""
    cache, age, kept = CacheStatus.NONE, AGE_NONE, {}
    for line in raw[:end].split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        name = name.lower()
        if name == b"x-cache-status":
            cache = CacheStatus.of(value)
        elif name == b"age":
            age = int(value) if value.strip().isdigit() else AGE_NONE
        elif name.startswith(STAMPEDE_HEADER):
            kept[name.decode("latin-1")] = value.decode("latin-1").strip()
    body = dechunked(raw) if b"\r\ntransfer-encoding:" in lower else None
    return Response(status, raw, end, cache, age, kept or NO_HEADERS, body)


def parsed(status: int, raw: bytes) -> Response:
    """The response ``raw`` holds whole (a parser found it valid), its head scanned only when it
    holds a header a row needs: a static server's head gives the status and the length alone."""
    end = raw.find(b"\r\n\r\n")
    lower = raw[:end].lower()
    if b"\r\nx-" in lower or b"\r\nage:" in lower or b"\r\ntransfer-encoding:" in lower:
        return scanned(status, raw, end, lower)
    return Response(status, raw, end)
