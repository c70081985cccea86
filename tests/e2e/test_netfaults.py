"""Network faults on the namespace lab: a delay and a partition on one worker's link to the cache,
packet loss on another's.

Hosts (one namespace each): cache, lock store, broker, origin, a router running the link daemon
(tests/linkd.py), workers w1 and w2 whose cache URL goes through the router (links w1-cache and
w2-cache), and the coordinator. One launch with ``net:delay:w1-cache=DELAY_MS`` for the whole run
and ``net:partition:w1-cache@AT+FOR``, and ``net:loss:w3-cache=LOSS_PCT`` for the whole run;
w2's link is relayed too, untouched: the control group.
Checks: w1's cache round-trip floor grows by the delay (w2's does not); error rows only from w1's
clients, only while the partition held; w1 served again after it; the faults recorded. Then
``coordinator rerun`` of that run on the same lab, with the link control only in its manifest:
the same options, the same faults applied again.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from tests.helpers import coordinator
from tests.netlab_links import nft_missing, start_router, start_services, start_workers
from tests.netns_lab import Lab, lab_in, netns_available

WORKERS = ("w1", "w2", "w3")
DELAY_MS = 3.0  # one way, each way: w1's round trip to the cache grows by 6 ms
AT_S, FOR_S = 2.0, 2.5  # longer than the clients' 2 s socket timeout: in-flight commands fail
SECONDS = 7.0
LAUNCH_TIMEOUT_S = 90
DELAY = f"net:delay:w1-cache={DELAY_MS:g}"
PARTITION = f"net:partition:cache-w1@{AT_S:g}+{FOR_S:g}"  # either order names the link
# Dropped packets are sent again by TCP after its retransmission timeout (200 ms at least): the
# lossy link's slowest requests take that long, where the control group's take a few ms.
LOSS_PCT = 5.0  # about one request in ten loses a packet on the way
LOSS = f"net:loss:w3-cache={LOSS_PCT:g}"
RETRANSMIT_MS = 200.0


@dataclass(frozen=True)
class Runs:
    """The launch with net: faults, and its ``coordinator rerun`` on the same lab."""

    out: Path
    said: str
    again: Path
    rerun: subprocess.CompletedProcess[str]


@pytest.fixture(scope="module")
def runs() -> Iterator[Runs]:
    reason = netns_available() or nft_missing()
    if reason:
        pytest.skip(reason)
    with lab_in("slnf-") as (net, workdir):
        services = start_services(net, workdir)
        control, cache_urls = start_router(net, workdir, WORKERS)
        start_workers(net, workdir, services, cache_urls)
        env = {**os.environ, **services.to_env(), "STAMPEDE_NET_CONTROL": control}
        out, said = _launch(net, workdir, env, "--fault", DELAY, "--fault", PARTITION,
                            "--fault", LOSS)
        del env["STAMPEDE_NET_CONTROL"]  # the rerun finds the link control in the manifest
        again = workdir / "again"
        rerun = coordinator("rerun", str(out), "--out", str(again), timeout=LAUNCH_TIMEOUT_S,
                            env=env, prefix=net.run_in(net.hosts["coord"][0]))
        yield Runs(out, said, again, rerun)


def _launch(net: Lab, workdir: Path, env: dict[str, str], *args: str) -> tuple[Path, str]:
    ns, _ = net.host("coord")
    out = workdir / "run"
    done = coordinator("launch", "--workers", str(len(WORKERS)), "--clients", "8",
                       "--strategies", "naive", "--ttl", "0.5", "--seconds", str(SECONDS), "--seed",
                       "--scale", "20000", "--origin-ms", "0.5", "--worker-timeout", "30",
                       "--out", str(out), *args, timeout=LAUNCH_TIMEOUT_S, env=env,
                       prefix=net.run_in(ns))
    logs = "\n".join(f"--- {p.name}\n{p.log_tail()}" for p in net.processes)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}\n{logs}"
    return out, done.stdout


def _applied(out: Path) -> dict[str, dict[str, Any]]:
    """The first trial's faults as the link control applied them (run.json), by spec."""
    trial = json.loads((out / "run.json").read_text())["trials"][0]
    return {a["fault"]: a for a in trial["faults_applied"]}


def test_delay_and_partition_on_one_link(runs: Runs) -> None:
    out = runs.out
    meta = json.loads((out / "run.json").read_text())
    trial = meta["trials"][0]
    floors = trial["cache_floor_ms"]  # per worker (Celery name w1@NAMESPACE), before the load
    name = {w.split("@")[0]: w for w in floors}
    applied = _applied(out)
    assert set(applied) == {DELAY, PARTITION, LOSS} and not any(a["error"] for a in applied.values())
    assert "partitioned" in applied[PARTITION]["detail"], applied
    assert f"drops {LOSS_PCT:g} % of packets" in applied[LOSS]["detail"], applied

    # the delay, in each worker's own cache round-trip floor
    assert floors[name["w1"]]["p5"] >= 2 * DELAY_MS, floors
    assert floors[name["w2"]]["p5"] < DELAY_MS, floors

    row = pq.read_table(out / "trials.parquet").to_pylist()[0]
    assert row["fault"] == f"{DELAY};{PARTITION};{LOSS}"
    assert row["fault_errors"] > 0 and row["db_calls_match"], row

    rows = ds.dataset(out / "requests", partitioning="hive").to_table()
    start_ns = trial["start_ns"]
    errors = rows.filter(pc.and_(pc.equal(rows["outcome"], "error"),
                                 pc.not_equal(rows["worker"], name["w3"])))  # loss: maybe a few
    assert set(errors["worker"].to_pylist()) == {name["w1"]}, errors["worker"].value_counts()
    err_s = [(t - start_ns) / 1e9 for t in errors["t_start_ns"].to_pylist()]
    assert min(err_s) >= AT_S - 2.1 and max(err_s) <= AT_S + FOR_S, sorted(err_s)  # 2 s timeout
    w1_ok = rows.filter(pc.and_(pc.equal(rows["worker"], name["w1"]),
                                pc.not_equal(rows["outcome"], "error")))
    after = [t for t in w1_ok["t_start_ns"].to_pylist() if t > start_ns + (AT_S + FOR_S + 1.2) * 1e9]
    assert after, "w1 was not served again after the partition ended"
    held = ((start_ns + (AT_S + 0.1) * 1e9), (start_ns + (AT_S + FOR_S - 0.1) * 1e9))
    ends = pc.add(w1_ok["t_start_ns"], w1_ok["latency_ns"]).to_pylist()
    assert not [t for t in ends if held[0] < t < held[1]], "w1 got answers through the partition"
    w2_ok = rows.filter(pc.equal(rows["worker"], name["w2"]))["t_start_ns"].to_pylist()
    assert [t for t in w2_ok if held[0] < t < held[1]], "w2 stopped too"
    assert "net:partition" in runs.said


def test_loss_on_one_link_shows_as_retransmission_delays(runs: Runs) -> None:
    """Packet loss, really applied (nftables drops on the router): w3's slowest requests wait for
    TCP's retransmission, w2's (relayed, no loss) do not."""
    rows = ds.dataset(runs.out / "requests", partitioning="hive").to_table()
    name = {w.split("@")[0]: w for w in set(rows["worker"].to_pylist())}

    assert "w3" in name, "the lossy worker sent no rows"

    def p99_ms(worker: str) -> float:
        mine = rows.filter(pc.equal(rows["worker"], name[worker]))["latency_ns"]
        return float(pc.quantile(mine, 0.99)[0].as_py()) / 1e6

    lossy, control = p99_ms("w3"), p99_ms("w2")
    assert lossy >= RETRANSMIT_MS and lossy > 4 * control, (lossy, control)


def test_a_rerun_repeats_the_net_faults_with_the_recorded_link_control(runs: Runs) -> None:
    done = runs.rerun
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr[-3000:]}"
    original, again = (json.loads((d / "run.json").read_text())["manifest"]
                       for d in (runs.out, runs.again))
    assert again["options"] == original["options"]
    assert original["options"]["net_control"]
    assert original["options"]["faults"] == [DELAY, PARTITION, LOSS]
    applied = _applied(runs.again)
    assert set(applied) == {DELAY, PARTITION, LOSS} and not any(a["error"] for a in applied.values())
    row = pq.read_table(runs.again / "trials.parquet").to_pylist()[0]
    assert row["fault"] == f"{DELAY};{PARTITION};{LOSS}" and row["fault_errors"] > 0, row
