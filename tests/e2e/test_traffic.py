"""Your own traffic, end to end on the embedded stack: a key trace of 3,000 requests (two bursts
in it) replayed open loop at its recorded pace by two workers, and uniform think time.

Tolerances (this 2-core VM, shared with the servers): the intended instants are the trace's to
the nanosecond (the replay's schedule is exact) and its keys in its order; the sends themselves
start within 25 ms of their instant for 99 % of requests, so 99 % of the inter-arrival times
are the recorded ones within 25 ms, and their mean within 1 %. Uniform think time between 20
and 40 ms: every pause within [20, 40] ms plus 15 ms of scheduling, their mean 30 +- 3 ms.
"""

from __future__ import annotations

import csv
import json
import random
import statistics
import subprocess
from itertools import pairwise
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.dataset as ds
import pytest

from tests.helpers import coordinator

BASE = ("--workers", "2", "--scale", "20000", "--origin-ms", "1", "--ttl", "1")
TOLERANCE_NS = 25_000_000


def write_trace(path: Path) -> list[tuple[int, str]]:
    """3,000 requests: Poisson at 400/s with two bursts of 300 in 250 ms (1,600/s); Pareto keys.
    Returns (offset ns, key) sorted, as the replay must send them."""
    rng = random.Random(27)
    times, t = [], 0.0
    while len(times) < 2400:
        t += rng.expovariate(400)
        times.append(t)
    for at in (1.5, 3.5):
        times += [at + rng.uniform(0, 0.25) for _ in range(300)]
    keys = [f"orders:{min(int(rng.paretovariate(1.2)) - 1, 49)}" for _ in times]
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["t", "key"])
        writer.writerows([f"{1000 + at:.6f}", key] for at, key in zip(times, keys, strict=True))
    first = min(round(at * 1e6) for at in times)
    return sorted(((round(at * 1e6) - first) * 1000, key) for at, key in zip(times, keys, strict=True))


def rows(out: Path) -> list[dict[str, object]]:
    table = ds.dataset(out / "requests", format="parquet", partitioning="hive").to_table()
    return table.filter(pc.field("op") != "refresh").sort_by("t_intended_ns").to_pylist()


@pytest.fixture(scope="module")
def replay(tmp_path_factory: pytest.TempPathFactory
           ) -> tuple[Path, list[tuple[int, str]], subprocess.CompletedProcess[str]]:
    work = tmp_path_factory.mktemp("trace")
    trace = write_trace(work / "trace.csv")
    done = coordinator("launch", "--keys-trace", str(work / "trace.csv"), "--strategies", "lock-dc",
                       "--clients", "32", "--seconds", "8", *BASE, "--out", str(work / "run"),
                       timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return work / "run", trace, done


def test_the_replay_sends_the_traces_keys_at_its_instants(
        replay: tuple[Path, list[tuple[int, str]], subprocess.CompletedProcess[str]]) -> None:
    out, trace, _ = replay
    start = json.loads((out / "run.json").read_text())["trials"][0]["start_ns"]
    sent = rows(out)[: len(trace)]  # then the trace's second pass begins
    assert sorted((int(r["t_intended_ns"]) - start, r["key"]) for r in sent) == trace  # type: ignore[call-overload]


def test_the_recorded_inter_arrival_times_within_the_tolerance(
        replay: tuple[Path, list[tuple[int, str]], subprocess.CompletedProcess[str]]) -> None:
    """The sends as they happened (t_start), against the trace's own instants (not the rows'
    intended ones): each within the tolerance of its recorded instant, so are the gaps."""
    out, trace, _ = replay
    start = json.loads((out / "run.json").read_text())["trials"][0]["start_ns"]
    sent = rows(out)[: len(trace)]
    assert not [r for r in sent if r["outcome"] == "error"]
    starts = sorted(int(r["t_start_ns"]) - start for r in sent)  # type: ignore[call-overload]
    late = sorted(s - t for s, (t, _) in zip(starts, trace, strict=True))
    assert late[int(len(late) * 0.99)] <= TOLERANCE_NS and late[0] >= -TOLERANCE_NS, late[-20:]
    actual = [b - a for a, b in pairwise(starts)]
    recorded = [b[0] - a[0] for a, b in pairwise(trace)]
    off = sorted(abs(a - b) for a, b in zip(actual, recorded, strict=True))
    assert off[int(len(off) * 0.99)] <= TOLERANCE_NS
    assert statistics.mean(actual) == pytest.approx(statistics.mean(recorded), rel=0.01)


def test_uniform_think_time_has_the_mean_and_bounds_asked(tmp_path: Path) -> None:
    done = coordinator("launch", "--think", "uniform:20:40", "--strategies", "naive", "--clients",
                       "8", "--seconds", "4", *BASE, "--out", str(tmp_path / "run"), timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    by_client: dict[object, list[dict[str, object]]] = {}
    for row in rows(tmp_path / "run"):
        by_client.setdefault(row["client"], []).append(row)
    pauses = [(int(b["t_start_ns"]) - int(a["t_start_ns"]) - int(a["latency_ns"])) / 1e6  # type: ignore[call-overload]
              for client in by_client.values() for a, b in pairwise(client)]
    assert len(pauses) > 500
    assert min(pauses) >= 19.9 and max(pauses) <= 40 + 15, (min(pauses), max(pauses))
    assert statistics.mean(pauses) == pytest.approx(30, abs=3)


def test_zipf_keys_run_end_to_end(tmp_path: Path) -> None:
    """--keys zipf:K:S through a whole launch: every key primed, the popularity the requests
    really had follows the ranks, PostgreSQL's count agrees."""
    out = tmp_path / "run"
    done = coordinator("launch", "--keys", "zipf:50:1.1", "--strategies", "lock-dc", "--clients",
                       "16", "--seconds", "4", *BASE, "--out", str(out), timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    counts: dict[str, int] = {}
    for row in rows(out):
        counts[str(row["key"])] = counts.get(str(row["key"]), 0) + 1
    by_rank = [counts.get(f"orders:{i}", 0) for i in range(50)]
    assert by_rank[0] == max(by_rank) and sum(by_rank[:5]) > sum(by_rank[25:])
    assert len(counts) >= 40  # the tail is reached too
    (trial,) = json.loads((out / "run.json").read_text())["trials"]
    assert trial["complete"]
    table = ds.dataset(out / "trials.parquet").to_table().to_pylist()[0]
    assert table["db_check"] == "ok" and table["errors"] == 0 and table["expiry_events"] > 0
