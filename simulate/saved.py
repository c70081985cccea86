"""A simulated run directory: ``run.json`` with ``kind: simulated`` and the world it simulated,
``trials.parquet`` (one row per strategy and replication, the replication as its ``repeat``) and
``expiries.parquet`` (one row per counted herd). No ``requests/``: a replication's rows are
millions of requests that nothing reads back, so only their figures are kept.

Why the figures are stored and read back, not recomputed: ``coordinator simulate`` prints the
table of what it has just written (``render_run``), and ``coordinator report`` of the directory
calls the same function, so the two tables are one computation over one set of numbers.
``compare`` and the measured readers (``results.figures.repeats``) see ordinary trial and event
rows: the simulated values are exact, so rows carry no ``*_lo`` / ``*_hi``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, fields, replace
from pathlib import Path
from typing import Any

from results.store import rundir
from results.store.schema import MANIFEST_VERSION
from simulate.metrics import Figures
from simulate.table import Simulated, render
from simulate.world import WorldSpec

KIND = "simulated"


def is_simulated(meta: Mapping[str, Any]) -> bool:
    """A run.json written by ``write_run``."""
    return meta.get("kind") == KIND


def read_meta_or_empty(root: Path) -> dict[str, Any]:
    """run.json, or {} when it is not JSON (the readers after this say what is wrong)."""
    try:
        return rundir.read_meta(root)
    except (OSError, ValueError):
        return {}


def world_json(world: WorldSpec) -> dict[str, Any]:
    """The world's options without the strategy (each trial row names its own)."""
    found = asdict(world)
    found.pop("strategy")
    found["origin_curve"] = [list(p) for p in world.origin_curve]
    return found


def world_of(meta: Mapping[str, Any]) -> WorldSpec:
    """The world recorded by ``write_run``; ValueError when run.json's ``world`` is not one."""
    raw = meta.get("world")
    if not isinstance(raw, Mapping):
        raise ValueError("run.json has no simulated world")
    known = {f.name for f in fields(WorldSpec)} - {"strategy"}
    if set(raw) - known:
        raise ValueError(f"run.json's world has unknown options: {sorted(set(raw) - known)}")
    curve = tuple((int(n), float(ms)) for n, ms in raw.get("origin_curve", ()))
    return replace(WorldSpec("", **{k: v for k, v in raw.items() if k != "origin_curve"}),
                   origin_curve=curve)


def meta_json(run_id: str, world: WorldSpec, labels: Sequence[str], replications: int,
              seed: int, argv: Sequence[str], from_run: str | None) -> dict[str, Any]:
    """run.json: what ``rerun`` needs to simulate again, and a manifest for ``compare``'s
    configuration section (its options are the world's, so a measured run differs in all)."""
    options = {"strategies": list(labels), "replications": replications, "seed": seed,
               **world_json(world)}
    return {"run_id": run_id, "kind": KIND, "world": world_json(world), "strategies": list(labels),
            "replications": replications, "seed": seed, "from_run": from_run,
            "manifest": {"manifest_version": MANIFEST_VERSION, "kind": KIND,
                         "command": list(argv), "options": options}}


def trial_row(run_id: str, trial: int, sim: Simulated, repeat: int) -> dict[str, Any]:
    """One replication as a trial: the measured columns it has a value for."""
    r, w = sim.runs[repeat], sim.spec
    return {"run_id": run_id, "trial": trial, "strategy": sim.label, "repeat": repeat + 1,
            "workers": w.app_servers, "clients": w.app_servers * w.clients, "ttl_s": w.ttl_s,
            "requests": r.requests, "errors": r.errors,
            "error_rate": r.errors / r.requests if r.requests else 0.0, "rps": r.rps,
            "p50_ms": r.p50_ms, "p99_ms": r.p99_ms, "origin_calls": sum(r.herds),
            "window_origin_calls": sum(r.herds), "expiry_events": r.events,
            "origin_per_expiry": r.origin_per_expiry, "herd_max": r.herd_max,
            "peak_origin_inflight": r.peak, "waits": r.waits, "complete": True,
            "event_kind": "simulated", "stale_served": 0, "error_types": ""}


def event_rows(run_id: str, trial: int, sim: Simulated, repeat: int) -> list[dict[str, Any]]:
    """The replication's counted herds, in order; the refresh cycles first (their order in a
    replication is not kept: only the count of each kind is read back)."""
    r = sim.runs[repeat]
    return [{"run_id": run_id, "trial": trial, "strategy": sim.label, "repeat": repeat + 1,
             "key": "hot", "source": "refresh" if i < r.refresh_events else "expired",
             "in_window": True, "calls": size, "waits": None}
            for i, size in enumerate(r.herds)]


def write_run(out: Path, meta: Mapping[str, Any], sims: Sequence[Simulated]) -> None:
    """``out`` (RunExists when it holds a run) with run.json, trials and events."""
    writer = rundir.RunWriter.create(out)
    writer.write_meta(meta)
    run_id, trial = str(meta["run_id"]), 1
    for sim in sims:
        for repeat in range(len(sim.runs)):
            writer.add_trial(trial_row(run_id, trial, sim, repeat))
            writer.add_expiries(event_rows(run_id, trial, sim, repeat))
            trial += 1


def _figures(row: Mapping[str, Any], events: Sequence[Mapping[str, Any]]) -> Figures:
    return Figures(
        origin_per_expiry=float(row["origin_per_expiry"]), herd_max=int(row["herd_max"]),
        peak=int(row["peak_origin_inflight"]), rps=float(row["rps"]),
        p50_ms=float(row["p50_ms"]), p99_ms=float(row["p99_ms"]),
        requests=int(row["requests"]), errors=int(row["errors"]), waits=int(row["waits"]),
        events=int(row["expiry_events"]),
        refresh_events=sum(e["source"] == "refresh" for e in events),
        herds=tuple(int(e["calls"]) for e in events))


def read_run(root: Path) -> list[Simulated]:
    """The strategies' replications as ``write_run`` stored them, in the run's order."""
    world = world_of(rundir.read_meta(root))
    expiries = rundir.read_expiries(root)
    events: dict[int, list[dict[str, Any]]] = {}
    for e in expiries.to_pylist() if expiries is not None else []:
        events.setdefault(int(e["trial"]), []).append(e)
    runs: dict[str, list[Figures]] = {}
    for row in rundir.read_trials(root).to_pylist():
        runs.setdefault(str(row["strategy"]), []).append(
            _figures(row, events.get(int(row["trial"]), [])))
    return [Simulated(label, replace(world, strategy=label), tuple(found))
            for label, found in runs.items()]


def render_run(root: Path) -> str:
    """The simulated table of a simulated run directory (simulate and report print this)."""
    return render(read_run(root))
