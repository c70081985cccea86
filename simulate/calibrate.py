"""``--from RUN_DIR``: the model's two service times taken from a measured run's rows.

The cache round trip is the median latency of the run's hits on the cache (a hit is one GET: its
latency is one round trip plus the client's own cost, which the model then charges to the
network; two-level's local hits never reach the cache and are left out: at 300k a second they
outnumbered every other hit of a run and made its round trip 1 us); the
origin time is the median ``origin_ns`` of the requests that called the origin (query time, the
pool wait apart, as the rows record it), and its median at each number of queries in flight
(``origin_curve``). From trials.parquet: the topology, the TTL and a think time that gives the
run's rate (docs/simulate.md).
"""

from __future__ import annotations

import statistics
from collections.abc import Collection
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from results.store import rundir
from simulate.driver import Curve
from simulate.world import WorldSpec

COLUMNS = ["outcome", "latency_ns", "origin_called", "origin_start_ns", "origin_ns",
           "local_hit"]
MIN_CALLS = 20  # the fewest origin calls a concurrency level needs to be a point of the curve


class Unreadable(ValueError):
    """The directory holds no request rows the model can calibrate from."""


def from_run(run_dir: Path, world: WorldSpec, given: Collection[str] = ()) -> WorldSpec:
    """``world`` with what the run says, except the fields in ``given`` (set on the command
    line, which wins)."""
    found = _service_times(run_dir)
    found.update(_topology(run_dir, found["rtt_us"]))
    return replace(world, **{k: v for k, v in found.items() if k not in given})


def _service_times(run_dir: Path) -> dict[str, Any]:
    """The median hit latency as the round trip, the median origin call as the origin time."""
    if not (run_dir / "requests").is_dir():
        raise Unreadable(f"{run_dir}: no requests/ directory (not a run directory)")
    try:
        dataset = rundir.requests_dataset(run_dir)
        rows = dataset.to_table(columns=[c for c in COLUMNS if c in dataset.schema.names])
        hits = _cache_hits(rows)["latency_ns"].to_numpy()
        called = rows.filter(pc.greater(rows["origin_called"].cast(pa.int64()), 0))  # a count or a flag
        loads = called["origin_ns"].to_numpy()
        curve = _curve_of(called)
    except (OSError, ValueError, KeyError, NotImplementedError) as exc:  # pyarrow's are these
        raise Unreadable(f"{run_dir}: its request rows cannot be read ({exc})") from None
    if hits.size == 0 or loads.size == 0:
        raise Unreadable(f"{run_dir}: needs both hits and origin calls "
                         f"(has {hits.size} hits, {loads.size} origin calls)")
    return {"rtt_us": float(np.median(hits)) / 1000, "origin_ms": float(np.median(loads)) / 1e6,
            "origin_curve": curve}


def _cache_hits(rows: pa.Table) -> pa.Table:
    """The hits answered by the cache itself (a local hit is none: older runs have no column)."""
    hits = rows.filter(pc.equal(rows["outcome"], "hit"))
    if "local_hit" not in hits.schema.names:
        return hits
    return hits.filter(pc.equal(hits["local_hit"].cast(pa.int64()), 0))


def _curve_of(called: pa.Table) -> Curve:
    """The curve of the calls that have a start time (older runs have none: no curve)."""
    if "origin_start_ns" not in called.schema.names:
        return ()
    timed = called.filter(pc.is_valid(called["origin_start_ns"]))
    return origin_curve(timed["origin_start_ns"].to_numpy(), timed["origin_ns"].to_numpy())


def origin_curve(starts_ns: np.ndarray, durations_ns: np.ndarray) -> Curve:
    """The median origin time at each number of queries in flight when a call started (itself
    included), for the levels with ``MIN_CALLS`` calls or more: the origin slowing under its
    own concurrency, as measured."""
    starts = np.asarray(starts_ns, np.int64)
    ends = starts + np.asarray(durations_ns, np.int64)
    inflight = (np.searchsorted(np.sort(starts), starts, "right")
                - np.searchsorted(np.sort(ends), starts, "right"))
    levels = [(int(k), float(np.median(durations_ns[inflight == k])) / 1e6)
              for k in np.unique(inflight) if (inflight == k).sum() >= MIN_CALLS]
    return tuple(levels)


def _topology(run_dir: Path, rtt_us: float) -> dict[str, Any]:
    """Workers as app servers, each one's share of the clients, the TTL, and the think time
    that gives the run's rate: a measured client spends (clients / rps) per request, of which
    the model's round trip is ``rtt_us``; the rest is the generator's own time, modelled as
    think time. Nothing when the run has no trials.parquet or no topology in it."""
    if not (run_dir / "trials.parquet").is_file():
        return {}
    trials = [t for t in rundir.read_trials(run_dir).to_pylist()
              if t.get("workers") and t.get("clients") and t.get("rps")]
    if not trials:
        return {}
    workers, clients = int(trials[0]["workers"]), int(trials[0]["clients"])
    # two-level's local hits make its rate no measure of a client's cycle on the cache
    cached = [t for t in trials if not t.get("local_hits")] or trials
    cycles_ms = [1000 * int(t["clients"]) / float(t["rps"]) for t in cached]
    return {"app_servers": workers, "clients": max(1, round(clients / workers)),
            "ttl_s": float(trials[0]["ttl_s"]),
            "think_ms": max(0.0, statistics.median(cycles_ms) - rtt_us / 1000)}


def describe(run_dir: Path, world: WorldSpec) -> str:
    curve = ", ".join(f"{k}: {ms:.2f}" for k, ms in world.origin_curve) or "none"
    return (f"calibrated from {run_dir}: cache round trip {world.rtt_us:.1f} us (median hit), "
            f"origin {world.origin_ms:.2f} ms (median origin call; ms by queries in flight: "
            f"{curve}), {world.app_servers} app "
            f"servers x {world.clients} clients, TTL {world.ttl_s:g} s, think "
            f"{world.think_ms:.2f} ms (the run's rate); options given on the command line win")
