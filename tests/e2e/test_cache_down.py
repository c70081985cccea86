"""``--preset cache-down``, shortened: the cache is killed mid-trial; under ``on_cache_error=fail``
the requests fail and the origin is spared, under ``origin`` they all reach the database, whose
own counter (pg_stat_statements) agrees with the clients' count of every one of those calls."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.compute as pc

from results.store import rundir
from tests.helpers import coordinator


def test_cache_down_sends_the_load_to_the_database_and_every_call_is_counted(
        tmp_path: Path) -> None:
    out = tmp_path / "cache-down"
    proc = coordinator("launch", "--out", str(out), "--quiet", "--preset", "cache-down",
                       "--strategies", "lock-dc,naive:on_cache_error=origin", "--seconds", "6",
                       "--clients", "16", "--scale", "20000", timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    trials = {t["strategy"]: t for t in rundir.read_trials(out).to_pylist()}
    fail, origin = trials["lock-dc"], trials["naive:on_cache_error=origin"]
    for trial in (fail, origin):
        assert trial["fault"] == "cache:kill@3+2" and trial["complete"]
        assert trial["db_calls_match"], trial  # pg_stat_statements agrees with the rows
        assert trial["db_calls"] == trial["origin_calls_total"]
    assert fail["fault_requests"] > 0
    assert fail["fault_errors"] == fail["fault_requests"]  # today's behaviour: every one fails
    assert fail["fault_origin_calls"] == 0
    assert origin["fault_errors"] == 0  # the origin answered each request the cache could not
    assert origin["fault_origin_calls"] == origin["fault_requests"] > 100
    # those calls answered for a dead cache: marked, and in no expiry's herd
    assert origin["fallback_calls"] >= origin["fault_origin_calls"] and fail["fallback_calls"] == 0
    # a herd, not the outage: at most every client twice (the expiry's herd, and the refill of
    # the restarted, empty cache, which no event precedes but that expiry)
    assert origin["origin_per_expiry"] <= 2 * 16, origin
    assert origin["fault_origin_per_s"] > 10 * max(origin["pre_fault_origin_per_s"], 1.0)
    assert origin["fault_pool_wait_p99_ms"] >= 0 and origin["fault_p99_ms"] > 0
    assert "pool wait p99 ms" in proc.stdout  # the fault table shows the database's side
    # restarted (empty) 2 s after the kill, at 5 s: the cache answers again and errors stop
    start_ns = next(t["start_ns"] for t in json.loads((out / "run.json").read_text())["trials"]
                    if t["strategy"] == "lock-dc")
    rows = rundir.requests_dataset(out).to_table(columns=["strategy", "t_start_ns", "outcome"])
    after = rows.filter(pc.and_(pc.equal(rows["strategy"], "lock-dc"),
                                pc.greater(rows["t_start_ns"], start_ns + 5_500_000_000)))
    assert after.num_rows > 100
    assert pc.sum(pc.equal(after["outcome"], "error")).as_py() == 0, "errors after the restart"
