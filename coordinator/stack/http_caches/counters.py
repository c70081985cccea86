"""The HTTP caches' own counters, parsed (pure): Varnish's ``varnishstat -j`` and nginx's
stub_status page.

Varnish 7.1 has no ``MAIN.n_waitinglist`` (removed in Varnish 5.0, commit 9b0a053: "Remove the
waiting list counter"); its waiting list shows in ``busy_sleep`` (a request put to sleep on a busy
object) and ``busy_wakeup`` (taken off it). nginx 1.22 open source counts no cache statuses: its
only counters are stub_status's connections and requests (the requests include the status and
config checks themselves), so the cache statuses are counted from the rows' ``X-Cache-Status``.

``MAIN.backend_req`` counts every request written to a backend connection, before its answer is
read (``V1F_FetchRespHdr``): a request written to a recycled keep-alive connection the app had
already closed counts, fails, and is sent again once (``MAIN.backend_retry``). What reached the
app is ``backend_req - backend_retry`` (see ``varnish_origin_requests``).
"""

from __future__ import annotations

import re
from typing import Any

import orjson

# What a Varnish front reports (varnishstat's names): counters ("c") grow, gauges ("g") do not.
VARNISH_COUNTERS = (
    "MAIN.client_req", "MAIN.backend_req", "MAIN.backend_retry", "MAIN.cache_hit", "MAIN.cache_miss",
    "MAIN.cache_hit_grace", "MAIN.cache_hitmiss", "MAIN.cache_hitpass", "MAIN.s_pass",
    "MAIN.busy_sleep", "MAIN.busy_wakeup", "MAIN.busy_killed", "MAIN.n_expired",
)
VARNISH_GAUGES = ("MAIN.n_object",)
NGINX_COUNTERS = ("accepts", "handled", "requests")
NGINX_GAUGES = ("active", "reading", "writing", "waiting")
_STUB = re.compile(
    r"Active connections:\s*(\d+)\s*server accepts handled requests\s*(\d+)\s+(\d+)\s+(\d+)\s*"
    r"Reading:\s*(\d+)\s*Writing:\s*(\d+)\s*Waiting:\s*(\d+)")


class CounterError(RuntimeError):
    """A counter page that does not read as expected (a changed format is never read as 0)."""


def parse_varnishstat(text: bytes | str) -> dict[str, int]:
    """The selected counters and gauges from ``varnishstat -j`` (7.x: ``{"version": 1,
    "counters": {...}}``; 6.x: the counters at the top level)."""
    data: Any = orjson.loads(text)
    counters = data.get("counters", data) if isinstance(data, dict) else None
    if not isinstance(counters, dict):
        raise CounterError("varnishstat -j: no counters object")
    out: dict[str, int] = {}
    for name in (*VARNISH_COUNTERS, *VARNISH_GAUGES):
        entry = counters.get(name)
        if not isinstance(entry, dict) or not isinstance(entry.get("value"), int):
            raise CounterError(f"varnishstat -j: no integer {name}")
        out[name] = entry["value"]
    return out


def varnish_origin_requests(change: dict[str, int]) -> int:
    """The requests Varnish's counters say reached the app, from a delta of VARNISH_COUNTERS."""
    return change["MAIN.backend_req"] - change["MAIN.backend_retry"]


def parse_stub_status(text: str) -> dict[str, int]:
    """nginx's stub_status page as numbers."""
    found = _STUB.search(text)
    if found is None:
        raise CounterError(f"not an nginx stub_status page: {text[:120]!r}")
    names = ("active", "accepts", "handled", "requests", "reading", "writing", "waiting")
    return dict(zip(names, map(int, found.groups()), strict=True))


def deltas(before: dict[str, int], after: dict[str, int], counters: tuple[str, ...]
           ) -> dict[str, int]:
    """``after - before`` for each counter (not the gauges); a counter that went down means
    the server restarted in between, which is an error, never a negative count."""
    out = {}
    for name in counters:
        change = after[name] - before[name]
        if change < 0:
            raise CounterError(f"{name} went down ({before[name]} -> {after[name]}): the server "
                               "restarted between the two readings")
        out[name] = change
    return out
