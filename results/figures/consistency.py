"""Consistency under writes (issue 14): how stale a defence serves after the origin changes.

Every figure is a pure function of request rows, so it can be traced to them. The origin's
history comes from the write rows alone: a write row records the version it committed
(``version_served``), when the commit was acknowledged (``commit_ns``) and when its invalidation
(delete, or write-through update) was done (``t_start_ns + latency_ns``). Only successful writes
count (outcome not ``error``, ``commit_ns`` > 0, ``version_served`` >= 0): an error row cannot
say whether or when its change landed.

Written keys are few and requests many (millions), so each figure is a step function per
written key (instants ascending, the highest version reached at each) looked up with one
``np.searchsorted`` per key over every row of that key: nothing loops over rows.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from results.figures import metrics, scan

# The request columns these figures read (all in REQUEST_SCHEMA; the version columns are absent
# from runs made before versions were recorded: check before reading them).
VERSION_COLUMNS = ("version_served", "version_set", "set_ns", "commit_ns")
COLUMNS = ("key", "op", "outcome", "in_window", "t_start_ns", "latency_ns", *VERSION_COLUMNS)
NONE = -1  # "no version" in the step lookups, as in the rows
_LOOP_KEYS = 16  # up to this many written keys, one mask per key beats sorting every row by key


@dataclass(frozen=True)
class Steps:
    """A step function per key: ``level[i]`` is the highest value reached at ``at[i]`` or before
    (a running maximum, so a late-acknowledged older write cannot lower the committed version).
    Values are versions over instants, or (for ``max_stale_ms``) read instants over versions."""

    keys: list[str]
    at: list[np.ndarray]
    level: list[np.ndarray]

    @classmethod
    def of(cls, keys: pa.ChunkedArray | pa.Array, at: np.ndarray, value: np.ndarray) -> Steps:
        names = sorted(str(k) for k in pc.unique(keys).to_pylist())
        codes = _codes(keys, names)
        out = cls(names, [], [])
        for _, idx in _groups(codes, len(names)):
            order = np.argsort(at[idx], kind="stable")
            out.at.append(at[idx][order])
            out.level.append(np.maximum.accumulate(value[idx][order]))
        return out

    def before(self, keys: pa.ChunkedArray | pa.Array, t: np.ndarray) -> np.ndarray:
        """For each (key, t): the highest value reached strictly before ``t``; NONE where none
        (a key without steps, or ``t`` not after its first step)."""
        out = np.full(len(t), NONE, dtype=np.int64)
        for i, idx in _groups(_codes(keys, self.keys), len(self.keys)):
            passed = np.searchsorted(self.at[i], t[idx], side="left")  # steps with at < t
            out[idx] = np.where(passed > 0, self.level[i][np.maximum(passed - 1, 0)], NONE)
        return out


def _codes(keys: pa.ChunkedArray | pa.Array, names: Sequence[str]) -> np.ndarray:
    """Each row's position in ``names``; -1 for a key not among them."""
    found = pc.index_in(keys, value_set=pa.array(names, type=keys.type))
    return np.asarray(pc.fill_null(found, -1).to_numpy(zero_copy_only=False), dtype=np.int64)


def _groups(codes: np.ndarray, n: int) -> Iterator[tuple[int, np.ndarray]]:
    """Row positions per code 0..n-1 (rows coded -1 left out)."""
    if n <= _LOOP_KEYS:
        for i in range(n):
            yield i, np.flatnonzero(codes == i)
        return
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(n + 1), side="left")
    for i in range(n):
        yield i, order[bounds[i]:bounds[i + 1]]


def _ints(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    return np.asarray(pc.fill_null(column, 0).to_numpy(zero_copy_only=False), dtype=np.int64)


def committed_writes(rows: pa.Table) -> pa.Table:
    """The writes that committed (op ``write``, a known commit instant and version), whether or
    not the cache step after them succeeded: the origin moved either way."""
    writes = rows.filter(metrics.is_write(rows))
    return writes.filter(pc.and_(pc.greater(writes["commit_ns"], 0),
                                 pc.greater_equal(writes["version_served"], 0)))


def successful_writes(rows: pa.Table) -> pa.Table:
    """The committed writes whose invalidation (or update) succeeded too (not an error row)."""
    writes = committed_writes(rows)
    return writes.filter(pc.not_equal(writes["outcome"], "error"))


def served(rows: pa.Table) -> pa.Table:
    """The clients' requests that answered with a known version (errors and -1 left out)."""
    reads = metrics.client_requests(rows)
    return reads.filter(pc.and_(pc.not_equal(reads["outcome"], "error"),
                                pc.greater_equal(reads["version_served"], 0)))


def committed(writes: pa.Table) -> Steps:
    """committed(key, t): the highest version whose commit was acknowledged before t."""
    return Steps.of(writes["key"], _ints(writes["commit_ns"]), _ints(writes["version_served"]))


def consistency_figures(rows: pa.Table | scan.Source) -> dict[str, object]:
    """The consistency columns of ``trials.parquet`` from one trial's request rows (every row of
    the trial, warm-up and drain included: the window is applied here), in at most two scans:
    the writes first (few), then, if any committed, every read against them. Definitions:
    docs/results.md, "Consistency under writes"."""
    source = rows if callable(rows) else scan.table_source(rows)
    writes_seen, total = [], 0
    for batch in source(COLUMNS):
        table = scan.plain(batch)
        writes_seen.append(table.filter(metrics.is_write(table)))
        total += _sum(served(table)["in_window"])
    writes = committed_writes(pa.concat_tables(writes_seen))
    counted = writes.filter(writes["in_window"])
    stale, sets, latest = 0, 0, []
    if writes.num_rows:
        newest, invalidated = committed(writes), _invalidated(successful_writes(writes))
        for batch in source(COLUMNS):
            table = scan.plain(batch)
            reads = served(table)
            behind = newest.before(reads["key"], _ints(reads["t_start_ns"])) > _ints(reads["version_served"])
            window = np.asarray(pc.fill_null(reads["in_window"], False).to_numpy(zero_copy_only=False), bool)
            stale += int(np.count_nonzero(behind & window))
            latest.append(_latest_reads(reads))
            sets += _stale_sets(table, invalidated)
    return {
        "writes": counted.num_rows,
        "stale_after_write": stale,
        "stale_after_write_share": stale / total if total else float("nan"),
        "max_stale_ms": _max_stale_ms(counted, pa.concat_tables(latest)) if latest else float("nan"),
        "stale_sets": sets,
    }


def _sum(column: pa.ChunkedArray | pa.Array) -> int:
    return int(pc.sum(pc.fill_null(column, False)).as_py() or 0)


def _latest_reads(reads: pa.Table) -> pa.Table:
    """Per (key, version served): the latest start of a read served it (these rows' share)."""
    latest = reads.group_by(["key", "version_served"]).aggregate([("t_start_ns", "max")])
    return latest.rename_columns(["key", "version_served", "t_start_ns"])


def _max_stale_ms(writes: pa.Table, latest: pa.Table) -> float:
    """For each write (key, v, commit c): the latest start of a read of that key that began after
    c and was served a version below v, minus c; the largest over the writes. Reads of the drain
    after the window count: they show how long a write of the window stayed unseen.

    The latest read served below v, over all time, is after c exactly when some such read is,
    so one maximum per (key, version served), running over the versions, answers every write;
    ``latest`` holds those maxima per scanned batch."""
    if writes.num_rows == 0:
        return float("nan")
    latest = latest.group_by(["key", "version_served"]).aggregate([("t_start_ns", "max")])
    # Per key: versions served ascending, and the latest read of that version or a lower one.
    served_below = Steps.of(latest["key"], _ints(latest["version_served"]),
                            _ints(latest["t_start_ns_max"]))
    # ``before(key, v)``: the latest start among reads served a version below v (NONE: none).
    last = served_below.before(writes["key"], _ints(writes["version_served"]))
    late = last - _ints(writes["commit_ns"])
    seen = (last != NONE) & (late > 0)
    return float(late[seen].max()) / 1e6 if seen.any() else 0.0


def stale_sets(rows: pa.Table) -> int:
    """Rows of any op (background refreshes and writes too, errors too: the SET was sent) that
    wrote a version into the cache after a newer write's invalidation was done: the cache then
    holds the older value for a whole TTL. Over the whole trial, like the servers' check."""
    writes = successful_writes(rows)
    return _stale_sets(rows, _invalidated(writes)) if writes.num_rows else 0


def _invalidated(writes: pa.Table) -> Steps:
    """invalidated(key, t): the highest version whose invalidation was done before t."""
    done = pc.add(writes["t_start_ns"], writes["latency_ns"])
    return Steps.of(writes["key"], _ints(done), _ints(writes["version_served"]))


def _stale_sets(rows: pa.Table, invalidated: Steps) -> int:
    sets = rows.filter(pc.and_(pc.greater_equal(rows["version_set"], 0),
                               pc.greater(rows["set_ns"], 0)))
    newest = invalidated.before(sets["key"], _ints(sets["set_ns"]))
    return int(np.count_nonzero(newest > _ints(sets["version_set"])))


def hottest_written_key(rows: pa.Table) -> str | None:
    """The written key the clients read most (ties: the first by name); None without writes.
    The one to plot: where a defence's staleness is seen by the most readers."""
    names = sorted(str(k) for k in pc.unique(successful_writes(rows)["key"]).to_pylist())
    if not names:
        return None
    keys = metrics.client_requests(rows)["key"]
    counts = np.bincount(_codes(keys, names) + 1, minlength=len(names) + 1)[1:]
    return names[int(np.argmax(counts))]


@dataclass(frozen=True)
class VersionSeries:
    """One key's versions over time: what the clients were served (sampled when huge; stale
    points are kept before fresh ones) against the committed version (a step line)."""

    key: str
    served_ns: np.ndarray  # start of each plotted read
    served: np.ndarray  # the version it was served
    stale: np.ndarray  # bool: a newer version had committed before it started
    commit_ns: np.ndarray  # commit instants, ascending
    committed: np.ndarray  # the committed version from each commit on
    reads: int  # reads before sampling
    stale_reads: int


def version_series(rows: pa.Table, key: str, max_points: int = 20_000) -> VersionSeries:
    """The versions served to the clients on ``key`` (every successful read, window or not)
    against the versions committed; at most ``max_points`` reads, evenly spaced, stale ones
    kept first (they are the point of the plot)."""
    mine = rows.filter(pc.equal(rows["key"], key))
    writes = successful_writes(mine)
    history = committed(writes)
    reads = served(mine)
    t, version = _ints(reads["t_start_ns"]), _ints(reads["version_served"])
    stale = history.before(reads["key"], t) > version if writes.num_rows else np.zeros(len(t), bool)
    keep = _sample(np.flatnonzero(stale), np.flatnonzero(~stale), max_points)
    steps_at = history.at[0] if history.keys else np.array([], np.int64)
    steps = history.level[0] if history.keys else np.array([], np.int64)
    return VersionSeries(key, t[keep], version[keep], stale[keep], steps_at, steps,
                         len(t), int(np.count_nonzero(stale)))


def _sample(first: np.ndarray, rest: np.ndarray, limit: int) -> np.ndarray:
    """All of ``first`` and ``rest`` when they fit in ``limit``; else evenly spaced picks of each,
    ``first`` taking what ``rest`` leaves and at least half (so a run of stale reads cannot
    crowd the fresh ones out of the plot); positions ascending."""
    def spaced(idx: np.ndarray, n: int) -> np.ndarray:
        if len(idx) <= n:
            return idx
        return idx[np.linspace(0, len(idx) - 1, num=n).astype(np.int64)] if n > 0 else idx[:0]

    picked = spaced(first, max(limit // 2, limit - len(rest)))
    return np.sort(np.concatenate([picked, spaced(rest, limit - len(picked))]))
