"""The value envelope: the cached bytes plus the expiry and the recompute time they carry.

XFetch needs the logical expiry and delta (the last recompute's duration) next to the value;
swr needs the soft expiry; lease's stale copy needs its expiry to report a stale age. A fixed
16-byte header: expiry in microseconds since the epoch (int64), delta in seconds (float64).
"""

from __future__ import annotations

import struct
import time
from typing import NamedTuple

_HEADER = struct.Struct(">qd")


class Envelope(NamedTuple):
    payload: bytes
    expiry_us: int
    delta_s: float

    def left_us(self, now_us: int) -> int:
        """Time until expiry (negative once expired)."""
        return self.expiry_us - now_us


def now_us() -> int:
    return time.time_ns() // 1000


def pack(payload: bytes, expiry_us: int, delta_s: float = 0.0) -> bytes:
    return _HEADER.pack(expiry_us, delta_s) + payload


def unpack(raw: bytes | str) -> Envelope:
    if isinstance(raw, str):
        raise TypeError("cached values are bytes: use a client without decode_responses")
    if len(raw) < _HEADER.size:
        raise ValueError(f"cached value of {len(raw)} bytes has no envelope header")
    expiry_us, delta_s = _HEADER.unpack_from(raw)
    return Envelope(raw[_HEADER.size:], expiry_us, delta_s)
