"""Each load model end to end on the embedded stack: real Redis, PostgreSQL, Celery workers."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from coordinator.cli import main
from results.figures import groups
from results.store import rundir
from results.store.schema import WRITE_OP


def _launch(out: Path, *args: str) -> pa.Table:
    with pytest.raises(SystemExit) as done:
        main(["launch", "--workers", "2", "--scale", "20000", "--strategies", "naive",
              "--quiet", "--out", str(out), *args])
    assert done.value.code == 0
    return rundir.requests_dataset(out).to_table()


def test_closed_loop_many_keys_think_time_and_invalidation(tmp_path: Path) -> None:
    rows = _launch(tmp_path / "run", "--clients", "6", "--keys", "many:20", "--ttl", "1",
                   "--seconds", "3", "--think-ms", "20", "--invalidate-rate", "20")
    reads = rows.filter(pc.equal(rows["op"], "orders"))
    writes = rows.filter(pc.equal(rows["op"], WRITE_OP))
    assert len(set(reads["key"].to_pylist())) == 20
    # think time bounds each client to < 1 request per 20 ms over ~3 s (+ lead slack)
    per_client = pc.value_counts(reads["client"]).field("counts").to_pylist()
    assert max(per_client) <= 3.5 / 0.020
    behind = pc.subtract(reads["t_start_ns"], reads["t_intended_ns"])
    assert pc.min(behind).as_py() >= 0 and pc.max(behind).as_py() < 50_000_000  # closed: no schedule
    # one writer (worker 0), Poisson arrivals at 20/s for ~3 s: 60 expected, sd ~8
    assert 20 <= writes.num_rows <= 100
    bumps = list(zip(writes["key"].to_pylist(), writes["version_served"].to_pylist(), strict=True))
    assert len(set(bumps)) == len(bumps) and min(v for _, v in bumps) >= 1  # a version per write
    assert pc.sum(pc.equal(writes["outcome"], "error")).as_py() == 0
    trials = rundir.read_trials(tmp_path / "run").to_pylist()
    assert trials[0]["db_calls_match"], trials[0]
    assert trials[0]["peak_origin_per_s"] >= 1


def test_open_loop_shop_mix_with_bypass_stages(tmp_path: Path) -> None:
    rows = _launch(tmp_path / "run", "--clients", "20", "--mix", "shop", "--keys", "many:5000",
                   "--rate", "60", "--bypass", "0,100", "--stage-seconds", "2", "--ttl", "2")
    run = rows.filter(pc.greater_equal(rows["stage"], 0))
    assert set(run["stage"].to_pylist()) == {0, 1}
    assert set(run["op"].to_pylist()) == {"product", "ranking"}
    stage1 = run.filter(pc.equal(run["stage"], 1))
    assert pc.all(stage1["bypass"]).as_py()  # 100 %: every request went to the origin
    assert not pc.any(run.filter(pc.equal(run["stage"], 0))["bypass"]).as_py()
    # total rate 60/s over 1 s warm-up + 2 x 2 s + 1 s drain, split over 2 workers: about 360 sends
    assert 300 <= rows.num_rows <= 370
    behind = pc.subtract(rows["t_start_ns"], rows["t_intended_ns"])
    assert pc.min(behind).as_py() >= 0  # never sent before its intended instant
    lat = pc.subtract(rows["latency_ns"], behind)
    assert pc.min(lat).as_py() > 0  # latency counts from the intended instant
    stages = groups.stage_rows(rows)
    assert {(f["stage"], f["endpoint"]) for f in stages} == {
        (0, "product"), (0, "ranking"), (1, "product"), (1, "ranking")}
    assert all(f["bypass_pct"] == 100 for f in stages if f["stage"] == 1)
    trials = rundir.read_trials(tmp_path / "run").to_pylist()
    assert trials[0]["db_calls_match"], trials[0]
