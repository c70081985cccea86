"""Origin versions inside cached values: what a request served, what a fill wrote.

The loader puts the origin's version of a key in front of the value (8 bytes, big-endian), so
every strategy carries it inside its own format without knowing what it means; a request
records the version it answered with, and a fill the version it wrote, in the probe. A value
without a stamp cannot be served as measured: reading one is an error, never a guess.
"""

from __future__ import annotations

import struct
import time

import redis

from strategies.base import Probe
from strategies.params import Expiry

_VERSION = struct.Struct(">q")
SIZE = _VERSION.size


def stamp(version: int, payload: bytes) -> bytes:
    """``payload`` as cached: its origin version first."""
    return _VERSION.pack(version) + payload


def version_of(value: bytes | bytearray | memoryview) -> int:
    """The origin version a stamped value carries."""
    if len(value) < SIZE:
        raise ValueError(f"cached value of {len(value)} bytes carries no version")
    return int(_VERSION.unpack_from(value)[0])


def served(probe: Probe, value: bytes) -> None:
    """This request answers with ``value``."""
    probe.version_served = version_of(value)


def stored(probe: Probe, value: bytes, sent_ns: int) -> None:
    """The cache accepted ``value``, whose write was sent at ``sent_ns``. A fill whose write is
    refused (a cancelled lease) never calls this: its ``version_set`` stays -1."""
    probe.version_set = version_of(value)
    probe.set_ns = sent_ns


def set_value(cache: redis.Redis, key: str, value: bytes, expiry: Expiry, probe: Probe) -> None:
    """``SET`` a stamped value with its expiry, recorded in ``probe`` as this request's write."""
    sent = time.time_ns()
    cache.set(key, value, px=expiry.px, pxat=expiry.pxat)
    stored(probe, value, sent)


def cached_version(cache: redis.Redis, key: str) -> int | None:
    """The version of a value stored as is (no envelope); None when the key is absent."""
    raw = cache.get(key)
    return None if raw is None else version_of(raw)  # type: ignore[arg-type]
