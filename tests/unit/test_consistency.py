"""Consistency under writes (results.figures.consistency) on hand-made rows: each definition pinned,
with its edges (a read at the commit instant, errors, refreshes, no writes)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from results.figures import consistency
from results.store.schema import REFRESH_OP, REQUEST_SCHEMA, WRITE_OP

MS = 1_000_000


def table(*rows: dict[str, Any]) -> pa.Table:
    """Request rows; every column not given takes a neutral value (a fresh hit in the window)."""
    base: dict[str, Any] = {f.name: False if f.type == pa.bool_() else 0 for f in REQUEST_SCHEMA}
    base.update(run_id="r", trial=1, strategy="lock-dc", repeat=1, worker="w", key="k", op="get",
                outcome="hit", error=None, in_window=True, version_served=0, version_set=-1,
                cache_status="", age_s=-1)
    full = [{**base, "t_intended_ns": row.get("t_start_ns", 0), **row} for row in rows]
    return pa.Table.from_pylist(full, schema=REQUEST_SCHEMA)


def read(t_ms: float, version: int, **kw: Any) -> dict[str, Any]:
    return {"t_start_ns": int(t_ms * MS), "latency_ns": MS, "version_served": version, **kw}


def write(version: int, commit_ms: float, done_ms: float, **kw: Any) -> dict[str, Any]:
    """A write row: started 1 ms before its commit, its invalidation done at ``done_ms``."""
    start = int((commit_ms - 1) * MS)
    return {"op": WRITE_OP, "client": -1, "outcome": "filled", "t_start_ns": start,
            "latency_ns": int(done_ms * MS) - start, "version_served": version,
            "commit_ns": int(commit_ms * MS), **kw}


def cache_set(set_ms: float, version: int, **kw: Any) -> dict[str, Any]:
    """A request that loaded ``version`` and wrote it into the cache at ``set_ms``."""
    return {**read(set_ms - 5, version), "outcome": "filled", "version_set": version,
            "set_ns": int(set_ms * MS), **kw}


def error(t_ms: float, **kw: Any) -> dict[str, Any]:
    return {**read(t_ms, -1), "outcome": "error", "error": "ConnectionError: x", **kw}


def test_no_writes_gives_zero_figures_and_nan_max_stale() -> None:
    figures = consistency.consistency_figures(table(read(10, 0), cache_set(20, 0), read(30, 0)))
    assert figures["writes"] == figures["stale_after_write"] == figures["stale_sets"] == 0
    assert figures["stale_after_write_share"] == 0.0
    assert math.isnan(float(figures["max_stale_ms"]))  # type: ignore[arg-type]
    nothing = consistency.consistency_figures(table(error(10)))
    assert math.isnan(float(nothing["stale_after_write_share"]))  # type: ignore[arg-type]
    assert set(figures) == {"writes", "stale_after_write", "stale_after_write_share",
                            "max_stale_ms", "stale_sets"}


def test_stale_after_write_counts_window_reads_that_began_after_a_newer_commit() -> None:
    rows = table(
        write(1, commit_ms=100, done_ms=110),
        read(50, 0),  # before the commit: fresh
        read(100, 0),  # exactly at the commit instant: not after it, fresh
        read(101, 0),  # after: stale
        read(120, 1),  # the new version: fresh
        error(130),  # an error is no read of a version (and not in the denominator)
        read(135, 0, outcome="error", error="TimeoutError: x"),  # even one that names a version
        read(105, 0, op=REFRESH_OP, client=-1),  # a background refresh is no client read
        read(140, 0, in_window=False),  # outside the window: not counted
    )
    figures = consistency.consistency_figures(rows)
    assert figures["writes"] == 1
    assert figures["stale_after_write"] == 1
    assert figures["stale_after_write_share"] == pytest.approx(1 / 4)


def test_committed_is_the_highest_version_committed_before_the_read() -> None:
    rows = table(write(1, 100, 101), write(2, 200, 201),
                 read(150, 1),  # v1 is the newest committed: fresh
                 read(250, 1),  # v2 committed at 200: stale
                 read(260, 0, key="other"))  # a key never written is never stale
    figures = consistency.consistency_figures(rows)
    assert figures["writes"] == 2 and figures["stale_after_write"] == 1


def test_failed_uncommitted_and_out_of_window_writes() -> None:
    rows = table(
        write(1, 100, 101, outcome="error", error="ConnectionError: x"),  # committed, delete failed
        write(2, 0, 150, commit_ns=0, version_served=-1, outcome="error"),  # never committed
        write(2, 300, 301, in_window=False),  # committed outside the window: history, not counted
        read(200, 0),  # after v1's commit: stale (the origin moved, whatever the cache step did)
        read(250, 1),  # v1 is the newest committed: fresh
        read(400, 1),  # after v2's commit (outside the window): stale
    )
    figures = consistency.consistency_figures(rows)
    assert figures["writes"] == 1
    assert figures["stale_after_write"] == 2
    assert figures["max_stale_ms"] == pytest.approx(100.0)  # v1: read(200, 0), 100 ms on
    # a failed cache step is no invalidation: no set after it can be a stale set against it
    assert consistency.stale_sets(table(write(1, 100, 101, outcome="error"), cache_set(200, 0))) == 0


def test_max_stale_is_the_last_read_of_an_older_version_after_each_commit() -> None:
    rows = table(
        write(1, commit_ms=100, done_ms=110),
        read(150, 0),
        read(300, 0, in_window=False),  # the drain counts: the write stayed unseen until 300
        read(320, 1),
        write(2, commit_ms=400, done_ms=405),
        read(450, 1),  # 50 ms after v2's commit
        read(900, 2),
        error(950),  # version -1 is no read of an older version
    )
    assert consistency.consistency_figures(rows)["max_stale_ms"] == pytest.approx(200.0)


def test_max_stale_counts_a_read_two_versions_behind_for_the_later_write() -> None:
    # v1 committed before the window (not counted); v2's last reader of an older version is the
    # v0 read at 700, not the v1 read at 300.
    rows = table(write(1, 100, 101, in_window=False), write(2, 200, 201), read(700, 0), read(300, 1))
    assert consistency.consistency_figures(rows)["max_stale_ms"] == pytest.approx(500.0)


def test_max_stale_is_zero_when_every_read_after_a_commit_is_new() -> None:
    rows = table(write(1, 100, 101), read(100, 0),  # at the commit instant: not after it
                 read(99, 0), read(101, 1), read(150, 0, op=REFRESH_OP, client=-1),
                 read(160, 0, key="other"))
    assert consistency.consistency_figures(rows)["max_stale_ms"] == 0.0


def test_stale_sets_are_older_versions_set_after_a_newer_invalidation_was_done() -> None:
    rows = table(
        write(1, commit_ms=100, done_ms=110),
        cache_set(105, 0),  # before the invalidation was done: the delete removes it
        cache_set(110, 0),  # at the instant it was done: not after it
        cache_set(120, 0),  # after: a stale set
        cache_set(130, 0, op=REFRESH_OP, client=-1),  # a background refresh's set counts too
        cache_set(135, 0, outcome="error", error="TimeoutError: x"),  # sent, then failed: counts
        cache_set(140, 1),  # the new version: fine
        {**cache_set(150, 0), "version_set": -1},  # a set the cache refused (lease): none
        cache_set(160, 0, key="other"),  # another key, never written
        cache_set(170, 0, in_window=False),  # the whole trial counts, like the servers' check
        write(5, commit_ms=200, done_ms=210, outcome="error", error="X"),  # a failed write
        cache_set(220, 1),  # not stale against the failed write
    )
    assert consistency.consistency_figures(rows)["stale_sets"] == 4


def test_a_write_through_update_is_not_a_stale_set_of_itself() -> None:
    rows = table(write(1, 100, 110, version_set=1, set_ns=105 * MS),
                 write(2, 200, 210, version_set=2, set_ns=205 * MS))
    assert consistency.consistency_figures(rows)["stale_sets"] == 0


def test_many_written_keys_give_the_same_figures_as_few(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = table(*[r for i in range(20) for r in (
        write(1, 100 + i, 110 + i, key=f"k{i}"), read(120 + i + i % 3, 0, key=f"k{i}"),
        read(130, 1, key=f"k{i}"), cache_set(140 + i, 0, key=f"k{i}"), read(50, 0, key=f"k{i}"))])
    monkeypatch.setattr(consistency, "_LOOP_KEYS", 100)  # one mask per key
    looped = consistency.consistency_figures(rows)
    monkeypatch.setattr(consistency, "_LOOP_KEYS", 0)  # every row sorted by key
    assert consistency.consistency_figures(rows) == looped
    # Each key: one stale read, and the stale set's own load (5 ms before its set) read v0 too.
    assert looped["writes"] == 20 and looped["stale_after_write"] == 40 and looped["stale_sets"] == 20
    assert looped["max_stale_ms"] == pytest.approx(35.0)  # k19: the set's read at 154, commit 119


def test_hottest_written_key_is_the_written_key_read_most() -> None:
    rows = table(write(1, 100, 101, key="a"), write(1, 100, 101, key="b"),
                 *[read(t, 0, key="a") for t in range(2)], *[read(t, 0, key="b") for t in range(5)],
                 *[read(t, 0, key="cold") for t in range(9)])
    assert consistency.hottest_written_key(rows) == "b"
    assert consistency.hottest_written_key(table(read(1, 0))) is None


def test_version_series_marks_stale_reads_and_keeps_them_when_sampling() -> None:
    rows = table(write(1, 100, 101), write(2, 200, 201),
                 *[read(t, 0) for t in range(0, 100, 2)],  # 50 fresh v0 before the first write
                 read(150, 0), read(250, 1),  # 2 stale
                 *[read(t, 2) for t in range(300, 400, 2)],  # 50 fresh v2
                 read(500, 0, key="other"))
    series = consistency.version_series(rows, "k")
    assert series.reads == 102 and series.stale_reads == 2
    assert list(series.commit_ns) == [100 * MS, 200 * MS] and list(series.committed) == [1, 2]
    assert list(series.served_ns[series.stale]) == [150 * MS, 250 * MS]
    small = consistency.version_series(rows, "k", max_points=10)
    assert len(small.served_ns) == 10 and int(small.stale.sum()) == 2
    assert np.all(np.diff(small.served_ns) >= 0) and small.served_ns[0] == 0


def test_sampling_keeps_stale_points_first_and_leaves_fresh_ones_half() -> None:
    stale, fresh = np.arange(0, 100, 2), np.arange(1, 100, 2)  # 50 of each
    few = consistency._sample(stale[:3], fresh, 10)
    assert len(few) == 10 and set(stale[:3]) <= set(few)  # every stale point, fresh ones fill up
    many = consistency._sample(stale, fresh, 10)
    assert len(many) == 10 and len(set(many) & set(stale)) == 5  # half each when both overflow
    assert list(consistency._sample(stale[:2], fresh[:2], 10)) == [0, 1, 2, 3]
