"""CPU time per process group, read from /proc: where a measurement's CPU went.

Benchmark 1 runs the all-hit trial and the bare GET loops on the same 2 cores; what separates
their rates is CPU spent somewhere. A ``CpuMeter`` reads user + system time (``/proc/PID/stat``,
clock ticks) of each named group of processes, their descendants included (a worker's beater,
PostgreSQL's backends), before and after a measurement; ``Spent`` divides it by the requests.
The bench process itself and its other descendants (the expiry listener) are the coordinator.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")
COORDINATOR = "coordinator"


def _stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, user + system ticks) of ``pid``; None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()
    return int(fields[1]), int(fields[11]) + int(fields[12])  # ppid, utime + stime


def _processes() -> dict[int, tuple[int, int]]:
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (stat := _stat(int(entry))) is not None:
            found[int(entry)] = stat
    return found


def _owner(pid: int, parents: Mapping[int, int], roots: Mapping[int, str]) -> str | None:
    """The group of ``pid``: its own root's, or its nearest ancestor's."""
    seen = 0
    while pid > 1 and seen < 64:
        if pid in roots:
            return roots[pid]
        pid, seen = parents.get(pid, 0), seen + 1
    return None


def snapshot(groups: Mapping[str, Iterable[int]]) -> dict[str, float]:
    """CPU seconds so far of each group (and of COORDINATOR: this process and its other
    descendants)."""
    roots = {pid: name for name, pids in groups.items() for pid in pids}
    roots.setdefault(os.getpid(), COORDINATOR)
    procs = _processes()
    parents = {pid: stat[0] for pid, stat in procs.items()}
    spent = dict.fromkeys([*groups, COORDINATOR], 0.0)
    for pid, (_, ticks) in procs.items():
        if (name := _owner(pid, parents, roots)) is not None:
            spent[name] += ticks * TICK_S
    return spent


@dataclass(frozen=True)
class Spent:
    """CPU seconds per group over one measurement, and its wall seconds."""

    seconds: dict[str, float]
    wall_s: float

    def per_request_us(self, requests: float) -> dict[str, float]:
        return {name: s / requests * 1e6 for name, s in self.seconds.items()} if requests else {}

    @property
    def total_s(self) -> float:
        return sum(self.seconds.values())


def between(before: Mapping[str, float], after: Mapping[str, float], wall_s: float) -> Spent:
    return Spent({name: max(0.0, after[name] - before.get(name, 0.0)) for name in after}, wall_s)


def children(pids: Iterable[int]) -> list[int]:
    """The processes whose parent is one of ``pids`` (a worker's beater)."""
    parents = set(pids)
    return [pid for pid, (ppid, _) in _processes().items() if ppid in parents]
