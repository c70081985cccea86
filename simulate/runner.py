"""Replications of every strategy in one world: the seeds are shared between strategies (common
random numbers), so two strategies' differences are not the draws' differences."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from simulate.metrics import figures
from simulate.table import Simulated
from simulate.world import WorldSpec, replicate


def simulate(labels: Sequence[str], world: WorldSpec, replications: int,
             seed: int = 0) -> list[Simulated]:
    """Each strategy ``label`` in ``world``, replicated with seeds ``seed`` .. + R - 1."""
    out = []
    for label in labels:
        spec = replace(world, strategy=label)
        runs = tuple(figures(replicate(spec, seed + i), spec.expiries, spec.ttl_s / 2)
                     for i in range(replications))
        out.append(Simulated(label, spec, runs))
    return out
