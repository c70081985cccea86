"""``--from RUN_DIR``: the model's two service times taken from a measured run's rows.

The cache round trip is the median latency of the run's hits on the cache (a hit is one GET: its
latency is one round trip plus the client's own cost, which the model then charges to the
network; two-level's local hits never reach the cache and are left out: at 300k a second they
outnumbered every other hit of a run and made its round trip 1 us); the
origin time is the median ``origin_ns`` of the requests that called the origin (query time, the
pool wait apart, as the rows record it), and its median at each number of queries in flight
(``origin_curve``). From trials.parquet: the topology, the TTL and a think time that gives the
run's rate (docs/simulate.md). Where the workers measured their floor (``floor_ms``, one round
trip) below the median hit, the round trip is that floor and the rest of a hit is the app
process's CPU queue (``simulate.cpu``): a hold per reply of the process's time per request
(workers / rps), at most the hit's excess over the floor.
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
    found.update(_topology(run_dir, found.pop("hit_us")))
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
    hit_us = float(np.median(hits)) / 1000
    return {"rtt_us": hit_us, "hit_us": hit_us, "origin_ms": float(np.median(loads)) / 1e6,
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


def _topology(run_dir: Path, hit_us: float) -> dict[str, Any]:
    """Workers as app servers, each one's share of the clients, the TTL, and the think time
    that gives the run's rate: a measured client spends (clients / rps) per request, of which
    a hit is ``hit_us``; the rest is the generator's own time between requests, modelled as
    think time. With the workers' floor, the CPU queue (``cpu``). Nothing when the run has no
    trials.parquet or no topology in it."""
    if not (run_dir / "trials.parquet").is_file():
        return {}
    trials = [t for t in rundir.read_trials(run_dir).to_pylist()
              if t.get("workers") and t.get("clients") and t.get("rps")]
    if not trials:
        return {}
    workers, clients = int(trials[0]["workers"]), int(trials[0]["clients"])
    # two-level's local hits make its rate no measure of a client's cycle on the cache
    cached = [t for t in trials if not t.get("local_hits")] or trials
    cycle_ms = statistics.median(1000 * int(t["clients"]) / float(t["rps"]) for t in cached)
    per_app = max(1, round(clients / workers))
    return {"app_servers": workers, "clients": per_app, "ttl_s": float(trials[0]["ttl_s"]),
            "think_ms": max(0.0, cycle_ms - hit_us / 1000),
            **cpu(trials, hit_us, 1000 * cycle_ms / per_app)}


def cpu(trials: list[dict[str, Any]], hit_us: float, hold_us: float) -> dict[str, Any]:
    """The round trip and the CPU queue's hold when the workers measured a floor below the
    median hit: the floor is the network, the hit's excess its wait for the interpreter and
    its hold. ``hold_us`` is a client's cycle over the clients of its process: the process's
    time per request when it is the bottleneck (a saturated generator), capped by the excess,
    which holds at least one turn. Never fitted to a run's herds."""
    floors = [float(t["floor_ms"]) * 1000 for t in trials
              if t.get("floor_ms") is not None and float(t["floor_ms"]) > 0]
    if not floors or statistics.median(floors) >= hit_us:
        return {}
    floor_us = statistics.median(floors)
    return {"rtt_us": floor_us, "cpu_us": min(hold_us, hit_us - floor_us)}


def describe(run_dir: Path, world: WorldSpec) -> str:
    curve = ", ".join(f"{k}: {ms:.2f}" for k, ms in world.origin_curve) or "none"
    trip = (f"{world.rtt_us:.1f} us (the workers' floor), CPU {world.cpu_us:.1f} us a reply "
            "per app process (its time per request)" if world.cpu_us
            else f"{world.rtt_us:.1f} us (median hit)")
    return (f"calibrated from {run_dir}: cache round trip {trip}, "
            f"origin {world.origin_ms:.2f} ms (median origin call; ms by queries in flight: "
            f"{curve}), {world.app_servers} app "
            f"servers x {world.clients} clients, TTL {world.ttl_s:g} s, think "
            f"{world.think_ms:.2f} ms (the run's rate); options given on the command line win")
