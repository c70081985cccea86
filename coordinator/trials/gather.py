"""One trial's rows as they arrive: from the trial's stream on the broker into Parquet.

Workers add numbered batches to the stream while they run (worker.shipper) and an end marker
with their totals. Each poll takes what arrived, writes each batch once (a batch delivered twice
is recognised by its worker and number), moves its times onto the coordinator's clock
(``align``) and trims the stream up to what it took, so the broker holds only what is not yet
written. After the trial, what a worker sent is complete when its end marker came and every
number below its count did; anything else is reported, batch by batch.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import redis

from results.store import transport
from results.store.rundir import TrialParts

Align = Callable[[str, pa.Table], pa.Table]  # worker name, wire rows -> request rows
TAKE = 32  # stream entries per read (a batch is up to a few MB: a read stays tens of MB)
POLL_BUDGET_S = 0.2  # one poll writes for this long at most, then the follow loop goes on


@dataclass
class Sent:
    """What arrived from one worker: batch numbers, rows, origin calls and errors in them, and
    its end marker's totals once it came."""

    seqs: set[int] = field(default_factory=set)
    rows: int = 0
    origin_calls: int = 0
    errors: int = 0
    duplicates: int = 0
    end: dict[str, Any] | None = None

    def missing(self, expected: int | None = None) -> list[int]:
        """Batch numbers below the count (the end marker's, or ``expected``) that never came."""
        count = expected if expected is not None else (self.end or {}).get("batches")
        if count is None:
            return []
        return [n for n in range(int(count)) if n not in self.seqs]


class RowGatherer:
    """``poll`` while the trial runs; ``sent`` says what each worker's rows were."""

    def __init__(self, client: redis.Redis, key: str, workers: Mapping[int, str], align: Align,
                 parts: TrialParts) -> None:
        self._client, self.key, self._workers = client, key, dict(workers)
        self._align, self.parts = align, parts
        self.sent = {name: Sent() for name in self._workers.values()}
        self._after = "0-0"

    def poll(self, budget_s: float | None = POLL_BUDGET_S) -> int:
        """Take and write the entries that arrived, for at most ``budget_s`` (None: all of them);
        return how many. The budget keeps the follow loop's cadence when the coordinator falls
        behind (a starved CPU): it polled nothing else for 8 s while the batches kept coming, so
        its progress line stopped and every worker looked silent for that long."""
        taken, until = 0, None if budget_s is None else time.monotonic() + budget_s
        while entries := self._client.xrange(self.key, min=f"({self._after}", count=TAKE):
            for entry_id, fields in entries:
                self._take(cast("Mapping[bytes, bytes]", fields))
                self._after = entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)
                taken += 1
                if until is not None and time.monotonic() > until:
                    break
            ms, _, seq = self._after.partition("-")
            self._client.xtrim(self.key, minid=f"{ms}-{int(seq) + 1}", approximate=False)
            if until is not None and time.monotonic() > until:
                break
        return taken

    def _take(self, fields: Mapping[bytes, bytes]) -> None:
        name = self._workers.get(int(fields[b"w"]))
        if name is None:  # a worker of an earlier attempt of this trial number: not ours
            return
        sent = self.sent[name]
        if b"end" in fields:
            sent.end = orjson.loads(fields[b"end"])
            return
        seq = int(fields[b"seq"])
        if seq in sent.seqs:
            sent.duplicates += 1
            return
        rows = self._align(name, transport.decode(fields[b"data"]))
        self.parts.write(rows)
        sent.seqs.add(seq)
        sent.rows += rows.num_rows
        sent.origin_calls += int(pc.sum(rows["origin_called"]).as_py() or 0)
        sent.errors += int(pc.sum(pc.equal(rows["outcome"], "error")).as_py() or 0)

    def counts(self) -> dict[str, int]:
        """The trial's counts so far, from the rows written (the progress line)."""
        return {"requests": sum(s.rows for s in self.sent.values()),
                "origin_calls": sum(s.origin_calls for s in self.sent.values()),
                "errors": sum(s.errors for s in self.sent.values())}

    def complete(self, name: str) -> bool:
        sent = self.sent[name]
        return sent.end is not None and not sent.missing()

    def take_late(self) -> int:
        """After the trial: what came since, written (a part file of its own); rows taken."""
        before = self.parts.rows
        self.poll(budget_s=None)
        self.parts.close()
        return self.parts.rows - before

    def close(self, keep_stream: bool) -> None:
        """The trial is written; its stream goes unless late rows may still come."""
        self.parts.close()
        if not keep_stream:
            self._client.delete(self.key)


SETTLE_S = 5.0  # after the tasks: how long the last batches and end markers may take to arrive


def settle(gatherer: RowGatherer, batches: Mapping[str, int], apps: Mapping[str, int]) -> bool:
    """After the tasks: take the last batches and end markers (bounded), then close; True when
    every worker's rows are complete (``batches``: each worker's count, from its result) and
    every app process's (its end marker came)."""
    deadline = time.monotonic() + SETTLE_S
    while True:
        gatherer.poll(budget_s=None)
        waiting = [w for w, n in batches.items() if len(gatherer.sent[w].seqs) < n]
        waiting += [a for a in apps if not gatherer.complete(a)]
        if not waiting or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    complete = all(gatherer.complete(w) for w in gatherer.sent)
    gatherer.close(keep_stream=not complete)
    return complete
