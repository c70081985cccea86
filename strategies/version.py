"""Origin versions inside cached values: what a request served, what a fill wrote.

The loader puts the origin's version of a key in front of the value (8 bytes, big-endian), so
every strategy carries it inside its own format without knowing what it means; a request
records the version it answered with, and a fill the version it wrote, in the probe. A value
without a stamp cannot be served as measured: reading one is an error, never a guess.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable
from typing import ClassVar

from strategies import envelope
from strategies.base import Deps, Probe
from strategies.commands import Commands
from strategies.params import Expiry, OnWrite, Ttl, WriteParams

_VERSION = struct.Struct(">q")
SIZE = _VERSION.size
# --compress: every answer decompresses the value it serves (the read-side cost of large values,
# experiment 004); set per trial by the worker (worker.build), None: values are served as held.
class _Reading:
    decode: Callable[[memoryview], object] | None = None


READING = _Reading()


def decode_with(decode: Callable[[memoryview], object] | None) -> None:
    """What every answer does with the payload it serves (zlib.decompress, or nothing)."""
    READING.decode = decode


def stamp(version: int, payload: bytes) -> bytes:
    """``payload`` as cached: its origin version first."""
    return _VERSION.pack(version) + payload


def version_of(value: bytes | bytearray | memoryview) -> int:
    """The origin version a stamped value carries."""
    if len(value) < SIZE:
        raise _unstamped(value)
    return int(_VERSION.unpack_from(value)[0])


def _unstamped(value: bytes | bytearray | memoryview) -> ValueError:
    return ValueError(f"cached value of {len(value)} bytes carries no version")


def served(probe: Probe, value: bytes) -> None:
    """This request answers with ``value`` (``version_of`` inline: it runs on every hit); with
    ``--compress`` it decompresses the payload, as a reader of the cache must (a value that does
    not decompress raises: an error row)."""
    if len(value) < SIZE:
        raise _unstamped(value)
    probe.version_served = _VERSION.unpack_from(value)[0]
    if (decode := READING.decode) is not None:
        decode(memoryview(value)[SIZE:])


def served_decoded(probe: Probe, value: bytes) -> None:
    """This request answers from an in-process copy held decoded (two-level's local hit): the
    version only, no decompression."""
    if len(value) < SIZE:
        raise _unstamped(value)
    probe.version_served = _VERSION.unpack_from(value)[0]


def stored(probe: Probe, value: bytes, sent_ns: int) -> None:
    """The cache accepted ``value``, whose write was sent at ``sent_ns``. A fill whose write is
    refused (a cancelled lease) never calls this: its ``version_set`` stays -1."""
    probe.version_set = version_of(value)
    probe.set_ns = sent_ns


def set_value(cache: Commands, key: str, value: bytes, expiry: Expiry, probe: Probe) -> None:
    """``SET`` a stamped value with its expiry, recorded in ``probe`` as this request's write."""
    sent = time.time_ns()
    cache.set(key, value, px=expiry.px, pxat=expiry.pxat)
    stored(probe, value, sent)


def cached_version(cache: Commands, key: str) -> int | None:
    """The version of a value stored as is (no envelope); None when the key is absent."""
    raw = cache.get(key)
    return None if raw is None else version_of(raw)


class CacheAside:
    """A strategy that keeps one value per key in the cache (``_deps.cache``).

    ``_fill`` is the plain fill (load, then SET with the strategy's TTL) that naive, the locks
    and the lock libraries share; swr and xfetch write an envelope and bring their own. The side
    of an origin write: ``on_write=delete`` drops the key (the next reader fills it), ``update``
    writes the new value through with ``_fill``. ``enveloped``: the value sits in an
    ``envelope`` (swr, xfetch), so its version is read from the envelope's payload."""

    enveloped: ClassVar[bool] = False
    _deps: Deps
    _ttl: Ttl
    _update: bool

    def _on_write_from(self, params: WriteParams) -> None:
        self._update = params.on_write is OnWrite.UPDATE

    def _fill(self, key: str, probe: Probe) -> None:
        value = self._deps.loader.load(key, probe)
        served(probe, value)
        set_value(self._deps.cache, key, value, self._ttl.draw(), probe)

    def on_write(self, key: str, probe: Probe) -> None:
        if self._update:
            self._fill(key, probe)
        else:
            self._deps.cache.delete(key)

    def cached_version(self, key: str) -> int | None:
        if not self.enveloped:
            return cached_version(self._deps.cache, key)
        raw = self._deps.cache.get(key)
        return None if raw is None else version_of(envelope.unpack(raw).payload)
