"""``coordinator report`` on a synthetic run of 100 million request rows (``BENCH_ROWS``): time
and peak memory.

Target (issue 25, docs/results.md): under 60 s and under 2 GB. The run is written in 1M-row
chunks (bounded memory), then the report runs in a child process so its peak RSS is its own.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bench.recording import size
from results.store.schema import REQUEST_SCHEMA, SCHEMA_VERSION, TRIAL_SCHEMA

ROWS = int(os.environ.get("BENCH_ROWS", "100000000"))
TRIALS = (("naive", 1), ("lock", 1), ("naive", 2), ("lock", 2))
CHUNK = 1_000_000
SECONDS, TTL_S, T0 = 30.0, 2.0, 1_800_000_000_000_000_000


def _chunk(rng: np.random.Generator, n: int, strategy: str, repeat: int, start: int) -> pa.Table:
    t_start = start + np.sort(rng.integers(0, int(SECONDS * 1e9), n))
    called = (rng.random(n) < (0.02 if strategy == "naive" else 0.0005)).astype(np.int8)
    origin_ns = np.where(called > 0, rng.lognormal(15, 0.4, n).astype(np.int64), 0)
    latency = rng.lognormal(14, 0.8, n).astype(np.int64) + origin_ns
    outcome = np.where(called > 0, "filled", "hit").astype(object)
    errors = rng.random(n) < 0.0001
    outcome[errors] = "error"
    columns = {
        "run_id": pa.array(np.full(n, "bench-report", object)),
        "strategy": pa.array(np.full(n, strategy, object)),
        "repeat": pa.array(np.full(n, repeat, np.int32)),
        "worker": pa.array(np.char.add("w", (rng.integers(0, 8, n)).astype(str)).astype(object)),
        "client": pa.array(rng.integers(0, 200, n).astype(np.int32)),
        "key": pa.array(np.full(n, "orders:0", object)), "op": pa.array(np.full(n, "get", object)),
        "t_intended_ns": pa.array(t_start), "t_start_ns": pa.array(t_start),
        "latency_ns": pa.array(latency),
        "outcome": pa.array(outcome, pa.string()), "origin_called": pa.array(called),
        "origin_start_ns": pa.array(np.where(called > 0, t_start, 0)), "origin_ns": pa.array(origin_ns),
        "pool_wait_ns": pa.array(np.where(called > 0, rng.integers(0, 10**6, n), 0)),
        "lock_wait_ns": pa.array(np.zeros(n, np.int64)), "stale_age_ns": pa.array(np.zeros(n, np.int64)),
        "error": pc.if_else(pa.array(errors), pa.scalar("ConnectionError: synthetic"),
                            pa.scalar(None, pa.string())),
        "in_window": pa.array(t_start >= start + 10**9),
    }
    schema = REQUEST_SCHEMA.remove(REQUEST_SCHEMA.get_field_index("trial"))
    for field in schema:  # columns added since (stage, bypass, local_hit, ...): zeros
        if field.name not in columns:
            columns[field.name] = pa.array(np.zeros(n, np.int64)).cast(field.type)
    return pa.table({f.name: columns[f.name] for f in schema}).cast(schema)


def build(root: Path, rows: int = ROWS) -> None:
    rng = np.random.default_rng(5)
    per_trial = rows // len(TRIALS)
    plans, summaries = [], []
    for number, (strategy, repeat) in enumerate(TRIALS, start=1):
        start = T0 + number * 100 * 10**9
        part = root / "requests" / f"trial={number}"
        part.mkdir(parents=True)
        with pq.ParquetWriter(part / "part-0.parquet", _chunk(rng, 1, strategy, repeat, start).schema,
                              compression="zstd") as writer:
            for done in range(0, per_trial, CHUNK):
                writer.write_table(_chunk(rng, min(CHUNK, per_trial - done), strategy, repeat, start))
        plans.append({"trial": number, "strategy": strategy, "repeat": repeat, "start_ns": start,
                      "window_start_ns": start + 10**9, "window_end_ns": start + int(SECONDS * 1e9),
                      "first_expiry_ns": start + 2 * 10**9, "complete": True})
        summaries.append({"run_id": "bench-report", "trial": number, "strategy": strategy, "repeat": repeat,
                          "params": "{}", "ttl_s": TTL_S, "requests": per_trial, "errors": 0,
                          "db_calls_match": True, "below_floor": False, "floor_ms": 0.05,
                          "origin_per_expiry": 1.0, "rps": per_trial / SECONDS, "p50_ms": 1.0,
                          "p99_ms": 10.0, "waits": 0, "stale_served": 0, "peak_origin_inflight": 1,
                          "origin_calls_total": 0, "db_calls": 0, "error_types": "", "complete": True})
    pq.write_table(pa.Table.from_pylist(summaries, schema=TRIAL_SCHEMA), root / "trials.parquet")
    meta = {"schema_version": SCHEMA_VERSION, "run_id": "bench-report", "status": "complete",
            "spec": {"workers": 8, "clients": 200, "ttl_s": TTL_S, "seconds": SECONDS, "repeat": 2,
                     "keys": ["orders:0"]}, "trials": plans}
    (root / "run.json").write_bytes(orjson.dumps(meta))


def main(rows: int = ROWS) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-report-") as tmp:
        root = Path(tmp) / "run"
        t0 = time.monotonic()
        build(root, rows)
        print(f"built {rows:,} rows in {time.monotonic() - t0:.2f} s "
              f"({size(sum(p.stat().st_size for p in root.rglob('*.parquet')))} on disk)")
        t0 = time.monotonic()
        subprocess.run([sys.executable, "-m", "coordinator", "report", str(root)], check=True,
                       stdout=subprocess.DEVNULL)
        seconds = time.monotonic() - t0
        peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        print(f"coordinator report: {seconds:.2f} s, peak RSS {peak_mb:,.0f} MB "
              f"(target < 60 s, < 2048 MB)")


if __name__ == "__main__":
    main()
