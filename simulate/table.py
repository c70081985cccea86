"""The simulated summary table: the measured table's columns (results.outputs.table), its cell
format (results.outputs.verdicts) and renderer (results.outputs.text), a ``kind`` column and a
title saying every figure is simulated, so no line of it is mistaken for a measurement."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from results.outputs import table, verdicts
from results.outputs.text import grid
from simulate.metrics import Figures, over_replications
from simulate.world import WorldSpec

_SHOWN = ("strategy", "origin/expiry [95 %]", "per", "herd p50 [95 %]", "herd p90 [95 %]",
          "herd max", "rps [95 %]", "p50 ms [95 %]", "p99 ms [95 %]", "errors", "waits", "peak")
assert set(_SHOWN) <= set(table.COLUMNS)  # the measured table's names, never new spellings
COLUMNS = (*_SHOWN[:6], "herd max [95 %]", *_SHOWN[6:], "kind")


@dataclass(frozen=True)
class Simulated:
    """One strategy's replications."""

    label: str
    spec: WorldSpec
    runs: tuple[Figures, ...]


def _per(runs: Sequence[Figures]) -> str:
    refresh = sum(r.refresh_events for r in runs)
    events = sum(r.events for r in runs)
    return "refresh" if refresh == events else "expiry" if refresh == 0 else "both"


def line(sim: Simulated) -> list[str]:
    """One strategy's cells: means over replications with their 95 % intervals."""
    runs, e = sim.runs, over_replications(sim.runs)
    requests = sum(r.requests for r in runs)
    errors = sum(r.errors for r in runs)
    return [
        sim.label,
        verdicts.cell(e["origin_per_expiry"], "origin_per_expiry"),
        _per(runs),
        verdicts.cell(e["herd_median"], "herd_median"),
        verdicts.cell(e["herd_p90"], "herd_p90"),
        f"{max(r.herd_max for r in runs)}",
        verdicts.cell(e["herd_max"], "herd_max"),
        verdicts.cell(e["rps"], "rps"),
        verdicts.cell(e["p50_ms"], "p50_ms"),
        verdicts.cell(e["p99_ms"], "p99_ms"),
        f"{errors / requests:.2%}" if requests else "n/a",
        f"{sum(r.waits for r in runs):,}",
        f"{max(r.peak for r in runs)}",
        "simulated",
    ]


def title(spec: WorldSpec, replications: int) -> str:
    load = (f"open loop {spec.rate:,.0f} req/s" if spec.rate is not None
            else f"closed loop, think {spec.think_ms:,.4g} ms")
    return (f"simulated: {spec.app_servers} app servers x {spec.clients} clients, {load}, "
            f"TTL {spec.ttl_s:g} s, origin {_origin(spec)} (pool {spec.pool} per app), "
            f"RTT {spec.rtt_us:,.4g} us{_cpu(spec)}, {spec.expiries} expiries x {replications} replications "
            "(intervals over replications)")


def _cpu(spec: WorldSpec) -> str:
    return f", CPU {spec.cpu_us:,.4g} us a reply per app" if spec.cpu_us else ""


def _origin(spec: WorldSpec) -> str:
    if not spec.origin_curve:
        return f"{spec.origin_ms:,.4g} ms"
    (lo, lo_ms), (hi, hi_ms) = spec.origin_curve[0], spec.origin_curve[-1]
    return f"{lo_ms:,.4g} ms at {lo} in flight to {hi_ms:,.4g} ms at {hi}, measured"


def render(sims: Sequence[Simulated]) -> str:
    """The title and the table; every strategy of one call shares one world."""
    head = title(sims[0].spec, len(sims[0].runs)) if sims else "simulated: nothing"
    return head + "\n" + grid(COLUMNS, [line(s) for s in sims])
