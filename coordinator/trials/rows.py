"""A trial's rows on the coordinator's side: aligned as they arrive, read back from Parquet.

Rows come from the workers with their own clocks' times; ``align`` adds the run's columns, moves
every instant onto the coordinator's clock and marks the window. Once a trial is written, every
figure of it is computed from its partition on disk, scanned batch by batch
(``results.figures.scan``): nothing of a trial is held whole, however long it ran.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from coordinator.trials.plan import TrialPlan
from results.figures import front_events, metrics, scan
from results.store.rundir import requests_dataset
from results.store.schema import REQUEST_SCHEMA, WRITE_OP

_ALIGN = ("t_intended_ns", "t_start_ns", "origin_start_ns", "set_ns", "commit_ns")
_ZERO_IS_NONE = frozenset(_ALIGN[2:])  # 0 means "none" (no origin call, no set, no commit)


def window_of(plan: TrialPlan) -> metrics.Window:
    return metrics.Window(plan.window_start_ns, plan.window_end_ns, plan.ttl_ms * 1_000_000)


def align(plan: TrialPlan, run_id: str, worker: str, offset_ns: int, wire: pa.Table) -> pa.Table:
    """Add run/trial columns, move times onto our clock, mark the measurement window."""
    for name in _ALIGN:
        column = pc.subtract(wire[name], offset_ns)
        if name in _ZERO_IS_NONE:  # keep 0 as 0
            column = pc.if_else(pc.equal(wire[name], 0), 0, column)
        wire = wire.set_column(wire.schema.get_field_index(name), name, column)
    n = wire.num_rows
    constants = {"run_id": run_id, "trial": plan.trial, "strategy": plan.label,
                 "repeat": plan.repeat, "worker": worker}
    for name, value in constants.items():  # pa.repeat: a Python list of n strings cost 60 ns a row
        field = REQUEST_SCHEMA.field(name)
        wire = wire.append_column(field, pa.repeat(pa.scalar(value, field.type), n))
    wire = wire.append_column("in_window", metrics.in_window(wire["t_start_ns"], window_of(plan)))
    rows = wire.select(REQUEST_SCHEMA.names)
    # A cast to the schema the rows already have still copies every column (120 ns a row).
    return rows if rows.schema.equals(REQUEST_SCHEMA) else rows.cast(REQUEST_SCHEMA)


class TrialRows:
    """One written trial's partition, read back: a source to scan, and the few rows some
    figures take whole (the writes, the rows of a fault's seconds)."""

    def __init__(self, root: Path, trial: int) -> None:
        self.dataset = requests_dataset(root)
        self._scanned = requests_dataset(root, dictionaries=True)
        self.where = ds.field("trial") == trial

    def source(self) -> scan.Source:
        return scan.dataset_source(self._scanned, self.where)

    def between(self, start_ns: int, end_ns: int) -> pa.Table:
        """The rows started in [start_ns, end_ns): seconds of a trial, never all of it."""
        return self.dataset.to_table(filter=self.where & (ds.field("t_start_ns") >= start_ns)
                                     & (ds.field("t_start_ns") < end_ns))

    def front_signs(self) -> pa.Table:
        """The answers an HTTP cache in front gave from a not-fresh entry (few rows: the herds)."""
        return self.dataset.to_table(columns=["key", "t_start_ns"], filter=self.where & ds.field(
            "cache_status").isin(list(front_events.NOT_FRESH)))

    def writes(self) -> pa.Table:
        return self.dataset.to_table(filter=self.where & (ds.field("op") == WRITE_OP))
