"""Where an HTTP trial's client threads send their GETs: one target, validated on both sides.

The coordinator builds an ``HttpTarget`` (``HttpTarget.parse`` from a URL template and the
``--http-*`` options) and sends it inside the trial's task; the worker rebuilds it with
``from_json``, which checks every field again: a task argument is input from the network, and a
header or path holding CR/LF would let it write requests of its own on the worker's sockets.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any
from urllib.parse import urlsplit

from model.custom import check_url_template

SCHEMES = {"http": 80, "https": 443}
MAX_HEADERS = 64
MAX_HEADER_BYTES = 8192
TIMEOUT_MS = (1.0, 600_000.0)
_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$")  # RFC 9110's field-name token
_VALUE = re.compile(r"^[\t\x20-\x7e\x80-\xff]*$")  # no CR, LF or other control byte
_HOST = re.compile(r"^[A-Za-z0-9._:\[\]-]{1,255}$")
_PATH = re.compile(r"^/[\x21-\x7e]{0,4095}$")  # visible ASCII, no space: one request line
# Framing is the client's own: a header that changes it would desynchronize the connection.
REFUSED_HEADERS = frozenset({"content-length", "transfer-encoding", "connection", "upgrade",
                             "te", "trailer", "expect"})


def check_header(name: str, value: str) -> tuple[str, str]:
    """``(name, value)`` when they can go on a request as they are; else ValueError."""
    if not isinstance(name, str) or not _TOKEN.match(name):
        raise ValueError(f"header name {name!r} is not a token (letters, digits, -, no spaces)")
    if not isinstance(value, str) or not _VALUE.match(value) or len(value) > MAX_HEADER_BYTES:
        raise ValueError(f"header {name}: the value holds a control character (CR, LF) or is "
                         f"over {MAX_HEADER_BYTES} characters")
    if name.lower() in REFUSED_HEADERS:
        raise ValueError(f"header {name}: the client sets it itself (refused: "
                         f"{', '.join(sorted(REFUSED_HEADERS))})")
    return name, value.strip()


_SECRET_NAME = re.compile(r"authorization|cookie|key|token|secret|auth|password", re.I)
MASK = "***"


def masked_header(name: str, value: str) -> tuple[str, str]:
    """``(name, value)`` as run.json may hold it: the value of a header that usually carries a
    credential (Authorization, Cookie, X-Api-Key, ...) masked."""
    return (name, MASK) if _SECRET_NAME.search(name) else (name, value)


def masked_header_text(text: str) -> str:
    """``'Name: value'`` with the value masked when the name is a credential's (else as is)."""
    name, colon, _ = text.partition(":")
    if not colon or not _TOKEN.match(name.strip()) or not _SECRET_NAME.search(name):
        return text
    return f"{name.strip()}: {MASK}"


def parse_header(text: str) -> tuple[str, str]:
    """``'Name: value'`` (``--http-header``) as a pair; ValueError with what is wrong."""
    name, colon, value = text.partition(":")
    if not colon or not name.strip():
        raise ValueError(f"{text!r} is not 'Name: value'")
    return check_header(name.strip(), value)


@dataclass(frozen=True)
class HttpTarget:
    scheme: str  # http or https
    host: str
    port: int
    path_template: str  # path and query, ``{key}`` once (replaced by the percent-encoded key)
    headers: tuple[tuple[str, str], ...] = ()  # sent on every request, after Host
    connect_timeout_s: float = 1.0
    read_timeout_s: float = 5.0
    # A cheap path whose sequential GETs are the physical floor of one request (None: none known)
    floor_path: str | None = None
    verify: bool = True  # https: check the server's certificate and name (--http-insecure: off)

    def __post_init__(self) -> None:
        self._check_place()
        if len(self.headers) > MAX_HEADERS:
            raise ValueError(f"{len(self.headers)} headers (at most {MAX_HEADERS})")
        for pair in self.headers:
            check_header(*pair)
        for name, seconds in (("connect", self.connect_timeout_s), ("read", self.read_timeout_s)):
            if (not isinstance(seconds, int | float) or isinstance(seconds, bool) or math.isnan(seconds)
                    or not TIMEOUT_MS[0] <= seconds * 1000 <= TIMEOUT_MS[1]):
                raise ValueError(f"{name} timeout {seconds!r} s is outside [1, 600,000] ms")
        if not isinstance(self.verify, bool):
            raise ValueError("verify must be true or false")

    def _check_place(self) -> None:
        """Scheme, host, port and paths: each one line on the request, nothing more."""
        if self.scheme not in SCHEMES:
            raise ValueError(f"scheme {self.scheme!r} is not http or https")
        if not isinstance(self.host, str) or not _HOST.match(self.host):
            raise ValueError(f"host {self.host!r} is not a host name or address")
        if not isinstance(self.port, int) or isinstance(self.port, bool) or not 0 < self.port < 65536:
            raise ValueError(f"port {self.port!r} is outside 1..65535")
        if (not isinstance(self.path_template, str) or not _PATH.match(self.path_template)
                or self.path_template.count("{key}") != 1):
            raise ValueError(f"path {self.path_template!r} must start with / and hold {{key}} "
                             "once, in visible ASCII without spaces")
        if self.floor_path is not None and (not isinstance(self.floor_path, str)
                                            or not _PATH.match(self.floor_path)):
            raise ValueError(f"floor path {self.floor_path!r} must start with / (visible ASCII)")

    @classmethod
    def parse(cls, url_template: str, headers: Sequence[tuple[str, str]] = (),
              connect_ms: float = 1000.0, read_ms: float = 5000.0, *,
              floor_path: str | None = None, verify: bool = True) -> HttpTarget:
        """The target of ``http(s)://HOST[:PORT]/path/{key}``; ValueError with one clear line."""
        check_url_template(url_template)
        parts = urlsplit(url_template)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        return cls(parts.scheme, parts.hostname or "", parts.port or SCHEMES[parts.scheme], path,
                   tuple(headers), connect_ms / 1000, read_ms / 1000, floor_path, verify)

    @property
    def url_template(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}{self.path_template}"

    @property
    def host_header(self) -> str:
        """The Host header: the port only when it is not the scheme's own."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == SCHEMES[self.scheme] else f"{host}:{self.port}"

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)} | {
            "headers": [list(pair) for pair in self.headers]}

    @classmethod
    def from_json(cls, data: object) -> HttpTarget:
        """The target a task carries, every field checked; ValueError naming the first bad one."""
        if not isinstance(data, Mapping):
            raise ValueError(f"http target must be an object, got {type(data).__name__}")
        names = {f.name for f in fields(cls)}
        if unknown := set(data) - names:
            raise ValueError(f"http target: unknown fields {', '.join(sorted(unknown))}")
        if missing := {"scheme", "host", "port", "path_template"} - set(data):
            raise ValueError(f"http target: missing fields {', '.join(sorted(missing))}")
        values = dict(data)
        raw = values.get("headers", [])
        if not isinstance(raw, list) or not all(
                isinstance(p, list | tuple) and len(p) == 2 for p in raw):
            raise ValueError("http target: headers must be a list of [name, value] pairs")
        values["headers"] = tuple((p[0], p[1]) for p in raw)
        return cls(**values)
