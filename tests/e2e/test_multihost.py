"""A full remote-mode launch across hosts made of network namespaces (one machine, no shared net).

cache, lock store, broker, origin, two workers and the coordinator each live in a namespace of
their own; rows come back only through Celery results. Checks: rows from every worker, expiry
events that line up across workers on the coordinator's clock, origin calls = PostgreSQL's count,
clock offsets recorded.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from coordinator.stack.celery_workers import worker_argv
from coordinator.stack.processes import ManagedProcess
from model.services import Services
from tests.helpers import coordinator
from tests.netlab_links import start_services
from tests.netns_lab import Lab, lab_in, netns_available

TTL_S = 0.5
WORKERS = ("w1", "w2")
LAUNCH_TIMEOUT_S = 90


@pytest.fixture
def lab() -> Iterator[tuple[Lab, Path]]:
    reason = netns_available()
    if reason:
        pytest.skip(reason)
    with lab_in("slnet-") as opened:
        yield opened


def _start_workers(net: Lab, workdir: Path, services: Services) -> None:
    env = {**os.environ, **services.to_env(), "PYTHONUNBUFFERED": "1"}
    for name in WORKERS:
        ns, _ = net.host(name)
        argv = [*net.run_in(ns), *worker_argv(f"{name}@{ns}")]
        net.processes.append(ManagedProcess(name, argv, workdir / f"{name}.log", env=env))


def _launch(net: Lab, workdir: Path, services: Services) -> Path:
    ns, _ = net.host("coord")
    out = workdir / "run"
    env = {**os.environ, **services.to_env()}  # the URLs come from the environment
    done = coordinator("launch", "--workers", str(len(WORKERS)), "--clients", "8",
                       "--strategies", "naive", "--ttl", str(TTL_S), "--seconds", "3", "--seed",
                       "--scale", "20000", "--origin-ms", "0.5", "--worker-timeout", "30",
                       "--out", str(out), timeout=LAUNCH_TIMEOUT_S, env=env, prefix=net.run_in(ns))
    logs = "\n".join(f"--- {p.name}\n{p.log_tail()}" for p in net.processes)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}\n{logs}"
    return out


def _expiry_clusters(times_ns: list[tuple[int, str]], gap_ns: int) -> list[dict[str, int]]:
    """Origin calls grouped into herds; each herd maps worker -> its first call."""
    clusters: list[dict[str, int]] = []
    last = None
    for t, worker in sorted(times_ns):
        if last is None or t - last > gap_ns:
            clusters.append({})
        clusters[-1].setdefault(worker, t)
        last = t
    return clusters


def test_launch_across_namespace_hosts(lab: tuple[Lab, Path]) -> None:
    net, workdir = lab
    services = start_services(net, workdir)
    _start_workers(net, workdir, services)
    out = _launch(net, workdir, services)

    meta = json.loads((out / "run.json").read_text())
    workers = sorted(meta["clock_offsets"])
    assert len(workers) == len(WORKERS)
    assert {w.split("@")[1] for w in workers} == {net.hosts[n][0] for n in WORKERS}
    for offset in meta["clock_offsets"].values():
        assert 0 < offset["uncertainty_ns"] < TTL_S * 1e9 * 0.05
    assert meta["services"]["cache_url"].startswith("redis://10.77.0.")

    trial = pq.read_table(out / "trials.parquet").to_pylist()[0]
    assert trial["db_calls_match"], trial
    assert trial["db_calls"] == trial["origin_calls_total"] > 0
    assert 0 <= trial["start_spread_ms"] < 250

    rows = ds.dataset(out / "requests", partitioning="hive").to_table()
    per_worker = {w: rows.filter(pc.equal(rows["worker"], w)).num_rows for w in workers}
    assert all(n > 0 for n in per_worker.values()), per_worker
    assert rows.filter(pc.equal(rows["outcome"], "error")).num_rows == 0

    calls = rows.filter(pc.and_(pc.equal(rows["origin_called"], 1), rows["in_window"]))
    herds = _expiry_clusters(
        list(zip(calls["origin_start_ns"].to_pylist(), calls["worker"].to_pylist(), strict=True)),
        gap_ns=int(TTL_S * 1e9 / 4))
    assert len(herds) == trial["period_events"], [sorted(h.values()) for h in herds]
    shared = [h for h in herds if len(h) == len(workers)]
    assert len(shared) * 2 >= len(herds), herds  # most expiries reach every host at once
    for herd in shared:  # on the coordinator's clock the hosts see the expiry together
        assert max(herd.values()) - min(herd.values()) < 50e6, herd
