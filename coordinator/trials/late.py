"""Trials written while a worker's rows were still missing (a worker given up on, then back):
the rows that come later are written to their partition and the trial's figures re-marked."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from coordinator.console import Console
from coordinator.trials.columns import db_word, delivery_columns
from coordinator.trials.events import TrialEvents
from coordinator.trials.gather import RowGatherer
from coordinator.trials.plan import TrialPlan
from coordinator.trials.rows import TrialRows, window_of
from model.wire import TrialResult
from results.figures import metrics
from results.figures.expiry_reports import Event
from results.store.rundir import RunWriter


@dataclass
class Unfinished:
    """A trial written with a worker's rows incomplete: what re-marking it takes."""

    plan: TrialPlan
    gatherer: RowGatherer
    summary: dict[str, Any]
    observed: list[Event]
    floor_ms: float
    present: Sequence[tuple[str, TrialResult]]
    front: bool = False  # its events are an HTTP cache's own word


class LateRows:
    """``keep`` an unfinished trial; ``take`` before each next trial; ``close`` at the end."""

    def __init__(self, writer: RunWriter, events: TrialEvents, console: Console) -> None:
        self._writer, self._events, self._console = writer, events, console
        self.unfinished: dict[int, Unfinished] = {}

    def keep(self, left: Unfinished) -> None:
        self.unfinished[left.plan.trial] = left

    def take(self) -> None:
        """Rows of earlier incomplete trials that came since (a worker given up on, then back):
        written to their partition, and each such trial re-marked in trials.parquet."""
        for trial, left in list(self.unfinished.items()):
            came = left.gatherer.take_late()
            if came:
                self._remark(left, came)
            if all(left.gatherer.complete(w) for w in left.gatherer.sent):
                left.gatherer.close(keep_stream=False)
                del self.unfinished[trial]

    def _remark(self, left: Unfinished, came: int) -> None:
        plan, summary = left.plan, left.summary
        scanned = metrics.scan_trial(TrialRows(self._writer.root, plan.trial).source(),
                                     window_of(plan), left.floor_ms)
        summary.update(scanned.figures)
        summary.update(self._events.figures(plan, scanned.called, summary["window_origin_calls"],
                                            left.observed, left.front))
        summary.update(delivery_columns(left.gatherer, left.present))
        summary["late_rows"] = int(summary.get("late_rows") or 0) + came
        if summary["db_calls"] >= 0:
            summary["db_calls_match"] = summary["db_calls"] == summary["origin_calls_total"]
        self._writer.add_trial(summary)
        self._console.say(f"trial {plan.trial}: {came:,} rows came after it was summarised: "
                          f"written, the trial re-marked (db calls {db_word(summary)})")

    def close(self) -> None:
        self.take()
        for left in self.unfinished.values():
            left.gatherer.close(keep_stream=False)
