"""The user's own origin (``--origin-sql`` on their PostgreSQL, or ``--origin-url``): what it is,
checked before anything runs, and carried to the workers inside the workload (pure).

A statement is the user's text, run as it is: the key is its one parameter, written ``%s``
(psycopg's placeholder, ``%%`` for a literal ``%``) or ``$1`` (PostgreSQL's, the text then goes to
the server untouched). A URL template holds ``{key}`` where the key goes (percent-encoded).
"""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import urlsplit


class InvalidOrigin(ValueError):
    """An origin option that cannot run; ``option`` names it (one line, exit 2)."""

    def __init__(self, option: str, message: str) -> None:
        super().__init__(message)
        self.option = option


class OriginKind(enum.StrEnum):
    BUILTIN = "builtin"  # the seeded tables and their statements (--mix)
    SQL = "sql"  # --origin-sql against --origin-dsn
    HTTP = "http"  # --origin-url
    SERVICE = "service"  # --service-url: the user's running service; its origin is its own


READS = ("SELECT", "WITH", "VALUES", "TABLE")  # statements that can be a read (the server confirms)
_COMMENT = re.compile(r"--[^\n]*|/\*.*?\*/", re.S)
_STRING = re.compile(r"'(?:[^']|'')*'")
_RAW = re.compile(r"\$1(?!\d)")
MAX_STATEMENT = 20_000  # characters: it travels in every trial task
TIMEOUT_RANGE = (0.001, 600.0)


def _code(sql: str) -> str:
    """The statement without comments and string literals (for the lexical checks only)."""
    return _STRING.sub("''", _COMMENT.sub(" ", sql))


def first_keyword(sql: str) -> str:
    """The statement's first word, upper case (``(SELECT ...)`` counts as SELECT)."""
    match = re.match(r"[\s(]*([A-Za-z]+)", _code(sql))
    return match.group(1).upper() if match else ""


def raw_placeholders(sql: str) -> bool:
    """True when the key is written ``$1`` (PostgreSQL's), False for ``%s`` (psycopg's)."""
    code = _code(sql)
    return "%s" not in code and bool(_RAW.search(code))


def check_statement(option: str, sql: str, reads_only: bool = True) -> str:
    """``sql`` stripped, or InvalidOrigin: empty, more than one statement, or (``reads_only``) a
    statement that is not a SELECT. The server's read-only session catches what words cannot."""
    text = sql.strip().rstrip(";").strip()
    if not text:
        raise InvalidOrigin(option, "the statement is empty")
    if len(text) > MAX_STATEMENT:
        raise InvalidOrigin(option, f"the statement has {len(text):,} characters (at most "
                                    f"{MAX_STATEMENT:,})")
    if ";" in _code(text):
        raise InvalidOrigin(option, "give one statement (it holds a ';')")
    word = first_keyword(text)
    if reads_only and word not in READS:
        raise InvalidOrigin(option, f"the statement is not a SELECT (it begins with "
                                    f"{word or '?'}); reads only, unless --allow-writes")
    return text


def check_url_template(url: str, option: str = "--origin-url") -> str:
    """An http(s) URL with a host and ``{key}`` in its path or query; else InvalidOrigin."""
    try:
        parts = urlsplit(url)
        port_ok = parts.port is None or 0 < parts.port < 65536
    except ValueError:
        raise InvalidOrigin(option, f"{url!r} is not a URL") from None
    if parts.scheme not in ("http", "https") or not parts.hostname or not port_ok:
        raise InvalidOrigin(option, f"{url!r} is not an http:// or https:// URL with a host")
    if url.count("{key}") != 1 or "{key}" in parts.netloc:
        raise InvalidOrigin(option, f"{url!r} must hold {{key}} once, in its path or query "
                                    "(e.g. http://HOST:PORT/items/{key})")
    if re.search(r"\{(?!key\})|(?<!\{key)\}", url):
        raise InvalidOrigin(option, f"{url!r} holds a brace other than {{key}}")
    return url


@dataclass(frozen=True)
class CustomOrigin:
    """Where the values come from when they are not the seeded tables'."""

    kind: OriginKind = OriginKind.BUILTIN
    read: str = ""  # the SELECT (key as its one parameter), or the URL template
    write: str = ""  # --write-sql: one statement taking the key, run by the writer
    writes_allowed: bool = False  # --allow-writes: a read that is not a SELECT, no read-only session
    connect_timeout_s: float = 1.0  # HTTP: connecting to the service
    read_timeout_s: float = 5.0  # HTTP: waiting for its answer

    def __post_init__(self) -> None:
        if self.kind is OriginKind.BUILTIN:
            if self.read or self.write:
                raise InvalidOrigin("--origin-sql", "a built-in origin takes no statement")
            return
        if self.kind in (OriginKind.HTTP, OriginKind.SERVICE):
            check_url_template(self.read, "--origin-url" if self.kind is OriginKind.HTTP
                               else "--service-url")
            if self.write:
                raise InvalidOrigin("--write-sql", "an HTTP origin takes no --write-sql")
        else:
            check_statement("--origin-sql", self.read, not self.writes_allowed)
            if self.write:
                check_statement("--write-sql", self.write, reads_only=False)
        for option, value in (("--http-connect-ms", self.connect_timeout_s),
                              ("--http-read-ms", self.read_timeout_s)):
            if not TIMEOUT_RANGE[0] <= value <= TIMEOUT_RANGE[1] or math.isnan(value):
                raise InvalidOrigin(option, f"{value * 1000:g} ms is outside [1, 600,000] ms")

    @property
    def builtin(self) -> bool:
        return self.kind is OriginKind.BUILTIN

    @property
    def read_only(self) -> bool:
        """The workers' origin sessions refuse every write (a SELECT that calls a writing
        function fails as an error row)."""
        return self.kind is OriginKind.SQL and not self.write and not self.writes_allowed

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: object) -> CustomOrigin:
        if data is None:
            return cls()
        if not isinstance(data, Mapping):
            raise InvalidOrigin("workload", "origin must be an object")
        values = dict(data)
        values["kind"] = OriginKind(values.get("kind", OriginKind.BUILTIN.value))
        return cls(**values)
