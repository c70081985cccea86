"""memcached as the harness itself talks to it: flush between trials, the server's counters,
one round trip for the physical floor, and the ``watch fetchers`` log stream of expired items.

Not the client under test (that is meta-memcache, adapters/): a plain socket and memcached's
text and meta protocol (doc/protocol.txt), bounded by a timeout, every failure an OSError.
URLs are ``memcache://HOST:PORT`` (port 11211 when none is given).
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from urllib.parse import urlsplit

SCHEME = "memcache"
DEFAULT_PORT = 11211
TIMEOUT_S = 2.0


class MemcacheError(OSError):
    """memcached answered something else than the protocol promises."""


def memcache_address(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    if parts.scheme != SCHEME or not parts.hostname:
        raise ValueError(f"not a memcached URL (expected {SCHEME}://HOST[:PORT]): {url}")
    return parts.hostname, parts.port or DEFAULT_PORT


class Memcache:
    """One connection to a memcached server, for the harness's own commands (one at a time:
    a lock keeps two threads from interleaving on the socket)."""

    def __init__(self, url: str, timeout_s: float = TIMEOUT_S) -> None:
        self.url = url
        self._sock = socket.create_connection(memcache_address(url), timeout=timeout_s)
        self._buffer = b""
        self._mutex = threading.Lock()

    def _line(self) -> bytes:
        while b"\r\n" not in self._buffer:
            chunk = self._sock.recv(65536)
            if not chunk:
                raise MemcacheError(f"{self.url} closed the connection")
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\r\n")
        return line

    def _command(self, text: bytes) -> bytes:
        with self._mutex:
            self._sock.sendall(text + b"\r\n")
            return self._line()

    def version(self) -> str:
        reply = self._command(b"version")
        if not reply.startswith(b"VERSION "):
            raise MemcacheError(f"{self.url}: unexpected reply to version: {reply[:80]!r}")
        return reply[8:].decode()

    def flush(self) -> None:
        reply = self._command(b"flush_all")
        if reply != b"OK":
            raise MemcacheError(f"{self.url}: flush_all answered {reply[:80]!r}")

    def stats(self) -> dict[str, int]:
        """The general counters (``stats``), integers only."""
        found: dict[str, int] = {}
        with self._mutex:
            self._sock.sendall(b"stats\r\n")
            while (line := self._line()) != b"END":
                _, name, value = line.decode().split(" ", 2)
                if value.isdigit():
                    found[name] = int(value)
        return found

    def touch_floor(self, key: str = "stampede:floor") -> None:
        """One meta get round trip (no value asked for): the cache's physical floor."""
        reply = self._command(b"mg " + key.encode())
        if reply not in (b"EN", b"HD"):
            raise MemcacheError(f"{self.url}: unexpected reply to mg: {reply[:80]!r}")

    def ttl_left_ms(self, key: str) -> int:
        """The remaining TTL in ms as Redis's PTTL says it (-1 no expiry, -2 no key); memcached
        knows whole seconds only."""
        reply = self._command(b"mg " + key.encode() + b" t")
        if reply == b"EN":
            return -2
        if not reply.startswith(b"HD"):
            raise MemcacheError(f"{self.url}: unexpected reply to mg t: {reply[:80]!r}")
        ttl = int(next(f[1:] for f in reply.split()[1:] if f.startswith(b"t")))
        return -1 if ttl == -1 else ttl * 1000

    def watch(self, *streams: str, idle_s: float = 1.0) -> Iterator[list[bytes]]:
        """Turn this connection into a watcher; yield the log lines (``key=value`` pairs, values
        URI-encoded, each ending in a bare newline) as they arrive, a list per read, and an
        empty list after ``idle_s`` without any (so the reader can look around)."""
        reply = self._command(b"watch " + " ".join(streams).encode())
        if reply != b"OK":
            raise MemcacheError(f"{self.url}: watch answered {reply[:80]!r}")
        self._sock.settimeout(idle_s)
        while True:
            try:
                chunk = self._sock.recv(1 << 20)
            except TimeoutError:
                yield []
                continue
            if not chunk:
                raise MemcacheError(f"{self.url} closed the watch")
            *lines, self._buffer = (self._buffer + chunk).split(b"\n")
            yield lines

    def close(self) -> None:
        self._sock.close()


def counters_of(stats: dict[str, int]) -> dict[str, int]:
    """Commands the server counted, by kind (a meta ``mg`` counts as a get, ``ms`` as a set)."""
    pairs = {"get": ("cmd_get",), "set": ("cmd_set",), "touch": ("cmd_touch",),
             "flush": ("cmd_flush",), "delete": ("delete_hits", "delete_misses"),
             "incr": ("incr_hits", "incr_misses"), "decr": ("decr_hits", "decr_misses"),
             "cas": ("cas_hits", "cas_misses", "cas_badval")}
    return {kind: sum(stats.get(name, 0) for name in names) for kind, names in pairs.items()}
