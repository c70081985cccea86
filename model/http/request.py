"""A GET's bytes for a key of a target, built once per key and kept (bounded): a kept key's
bytes cost 0.14 us here, building them 1.74 us (``urllib.parse.quote`` most of it)."""

from __future__ import annotations

from urllib.parse import quote

from model.http.target import HttpTarget

PREBUILT_KEYS = 100_000  # request bytes kept for this many keys (a key set can be 1M keys)


class RequestBytes:
    """``GET <path with the key> HTTP/1.1`` and the headers, as bytes, built once per key."""

    def __init__(self, target: HttpTarget, limit: int = PREBUILT_KEYS) -> None:
        prefix, suffix = target.path_template.split("{key}")
        names = {name.lower() for name, _ in target.headers}
        lines = [] if "host" in names else [f"Host: {target.host_header}"]
        lines += [f"{name}: {value}" for name, value in target.headers]
        self._head = f"GET {prefix}".encode("ascii")
        self._headers = ("".join(f"{line}\r\n" for line in lines) + "\r\n").encode("latin-1")
        self._tail = f"{suffix} HTTP/1.1\r\n".encode("ascii") + self._headers
        self.built: dict[str, bytes] = {}  # key -> its request (read by HttpConnection.get)
        self._limit = limit

    def __call__(self, key: str) -> bytes:
        request = self.built.get(key)
        if request is None:
            request = self._head + quote(key, safe="").encode("ascii") + self._tail
            if len(self.built) < self._limit:
                self.built[key] = request
        return request

    def path(self, path: str) -> bytes:
        """A GET of a fixed path (the floor's), with the same headers."""
        return f"GET {path} HTTP/1.1\r\n".encode("ascii") + self._headers
