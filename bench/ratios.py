"""Benchmark 1's figures: each round's rates, the two ratios per round, and the lines that print
them (``make bench`` ends with the ratios: each the median of its rounds, with their range).

A ratio is taken within a round (the all-hit trial over the floor loop, over Locust's best,
measured minutes apart at most), then the median over the rounds: the VM's speed changes by the
hour, and a ratio of medians taken at different moments would mix two machines.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from bench.locust_bench import USER_CLASSES, LocustRun

# The CPU groups in the order they print (bench.cpu's COORDINATOR last).
GROUPS = ("worker processes", "their beaters", "cache server", "broker", "lock store", "postgres",
          "coordinator")


@dataclass(frozen=True)
class Round:
    """One round: the all-hit trial's rate, each bare loop's, Locust's best configuration's (None:
    no Locust), the CPU per request of each measurement by process group (us), and the all-hit
    trial's rate on asyncio clients (None: not run)."""

    all_hit: float
    loops: Mapping[str, float]
    locust: float | None = None
    cpu: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    all_hit_asyncio: float | None = None

    @property
    def efficiency(self) -> float:
        """All-hit trial / plain-socket loop: the product's share of the Python floor."""
        return self.all_hit / self.loops["socket"]

    @property
    def vs_locust(self) -> float | None:
        return self.all_hit / self.locust if self.locust else None


def spread(values: Sequence[float], digits: str = ".2f", unit: str = "") -> str:
    """``median [min, max] over N rounds``."""
    return (f"{statistics.median(values):{digits}}{unit} [{min(values):{digits}}, "
            f"{max(values):{digits}}] over {len(values)} round{'s' if len(values) > 1 else ''}")


@dataclass(frozen=True)
class Figures:
    """Benchmark 1: its rounds and Locust's sweep (None: Locust not installed)."""

    rounds: Sequence[Round]
    locust: Sequence[LocustRun] | None = None

    @property
    def efficiency(self) -> float:
        return statistics.median(r.efficiency for r in self.rounds)

    @property
    def vs_locust(self) -> float | None:
        ratios = [v for r in self.rounds if (v := r.vs_locust) is not None]
        return statistics.median(ratios) if ratios else None

    def on_asyncio(self) -> Figures | None:
        """The same figures with the all-hit trial on asyncio clients in its place (None: not
        run in every round); the floor and Locust stay the same measurements."""
        swapped = [replace(r, all_hit=r.all_hit_asyncio, all_hit_asyncio=None)
                   for r in self.rounds if r.all_hit_asyncio is not None]
        return Figures(swapped, self.locust) if swapped and len(swapped) == len(self.rounds) else None

    def best_locust(self, user: str | None = None) -> LocustRun | None:
        """Locust's fastest run of the sweep, of ``user`` only when given."""
        runs = [r for r in self.locust or [] if user in (None, r.user)]
        return max(runs, key=lambda r: r.rps, default=None)

    def efficiency_line(self, label: str = "") -> str:
        return (f"generator efficiency{label} (all-hit trial / plain-socket loop, each round): "
                f"{spread([r.efficiency for r in self.rounds])}")

    def vs_locust_line(self, label: str = "") -> str:
        """Each round's all-hit trial over that round's run of Locust's fastest configuration,
        then, from the sweep, against each user's best."""
        best = self.best_locust()
        ratios = [v for r in self.rounds if (v := r.vs_locust) is not None]
        if best is None or not ratios:
            return f"vs Locust{label}: n/a (no Locust run: see above)"
        hit = statistics.median(r.all_hit for r in self.rounds)
        each = "; ".join(f"{hit / r.rps:.1f} x against {u} (--processes {r.processes})"
                         for u in USER_CLASSES if (r := self.best_locust(u)) is not None and r.rps)
        return (f"vs Locust{label}: {spread(ratios, unit=' x')} against its fastest, "
                f"{best.user} at --processes {best.processes}, run in each round (the sweep's "
                f"best of each, against the rounds' median all-hit rate: {each})")

    def cpu_line(self, measurement: str) -> str:
        """``total = group us + ...`` per request, each the median over the rounds; groups that
        spent nothing measurable are named, not given a 0."""
        per = {g: statistics.median(r.cpu[measurement].get(g, 0.0) for r in self.rounds)
               for g in GROUPS if any(measurement in r.cpu for r in self.rounds)}
        shown = {g: v for g, v in per.items() if v >= 0.05}
        idle = [g for g in per if g not in shown]
        return (f"{sum(shown.values()):.1f} us = "
                + " + ".join(f"{g} {v:.1f}" for g, v in shown.items())
                + (f" (nothing measurable: {', '.join(idle)})" if idle else ""))
