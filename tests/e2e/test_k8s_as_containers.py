"""k8s/base with the memcached component (k8s/overlays/memcached) run for real without a
cluster: each workload as containers (tests/containers/).

As one ``kubectl apply -k k8s/overlays/memcached`` may: the coordinator Job's pod starts first and asks for
its services before any exists (names do not resolve), then cache, locks, broker, memcached, origin
(which initialises first) and the 8 worker replicas start; readiness probes are polled, the workers'
again while the trials run; the Job's own command and args run the experiment
(a short trial appended). The Secret's password holds ``@`` and ``/``. The run directory is then
read through the runs reader of k8s/tools, as ``kubectl cp`` would, and checked like the compose
run: the contract columns, naive's herd far above lock's, ``db calls match``, 8 workers with
clock offsets, meta-memcache on the component's memcached (reached through the URL its patch put
in the ConfigMap) with expiries from the server. Nothing of it is left behind.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pyarrow.parquet as pq

from tests.containers.engine import Images, docker
from tests.containers.k8s_as_containers import Cluster, check_postgres_uid_999
from tests.e2e.test_launch import REQUEST_COLUMNS, TRIAL_COLUMNS
from tests.helpers import ROOT
from tests.kustomize_lite import render

K8S = ROOT / "k8s"
PASSWORD = "k8s-p@ss/w0rd:x"  # a DSN with it pasted in would parse another host
# Appended to the Job's args (the last value of an option wins): short trials on a small table.
# TTL 2 s: memcached keeps whole seconds, clock offsets must be known within 5% of it, and 2
# shared cores carry all 14 pods.
TRIAL = ("--strategies", "naive,lock,meta-memcache", "--seconds", "8", "--ttl", "2",
         "--clients", "64", "--scale", "50000", "--origin-ms", "2")
SERVICES = (("Deployment", "cache"), ("Deployment", "locks"), ("Deployment", "broker"),
            ("Deployment", "memcached"), ("StatefulSet", "origin"))


def manifests() -> list[dict[str, Any]]:
    docs = render(K8S / "overlays" / "memcached") + render(K8S / "tools")
    [secret] = [d for d in docs if d["kind"] == "Secret"]
    secret["stringData"]["POSTGRES_PASSWORD"] = PASSWORD
    return docs


@dataclass(frozen=True)
class Probe:
    at_ns: int  # wall clock (the containers share the host's clock)
    pod: str
    ok: bool
    said: str


@dataclass
class Outcome:
    code: int  # the Job's exit code
    log: str  # its output (the table first)
    ready_s: dict[str, float]  # seconds from a workload's start to its readiness (its slowest pod)
    workers: list[str]  # the worker pods' names
    probes: list[Probe]  # the workers' readiness probes, from their start to the Job's end


def watch_workers(cluster: Cluster, workers: list[str], stop: threading.Event) -> list[Probe]:
    """The workers' readiness probe, one worker after another, from their start until ``stop``
    (the Job ended): a probe failing once a worker was ready would turn it NotReady on a cluster."""
    probes: list[Probe] = []
    for pod in itertools.cycle(workers):
        if stop.is_set():
            return probes
        at = time.time_ns()
        done = cluster.probe("Deployment", "worker", pod)
        probes.append(Probe(at, pod.removeprefix(f"{cluster.network}-"), done.returncode == 0,
                            (done.stdout + done.stderr).strip()[-200:]))
        stop.wait(1.5)
    return probes


def first_wait(job: str, timeout_s: float = 120) -> None:
    """Until the Job has said it waits for a service (its first round of asking)."""
    deadline = time.monotonic() + timeout_s
    while "waiting for --" not in docker("logs", job).stderr:
        assert time.monotonic() < deadline, docker("logs", job).stderr[-2000:]
        time.sleep(0.5)


def run_the_manifests(images: Images, dest: Path) -> Outcome:
    """The k8s-shaped run, the run directory copied to ``dest``, everything removed."""
    check_postgres_uid_999(images.postgres)
    timings: dict[str, float] = {}
    with Cluster(manifests(), images.public()) as cluster:
        t0 = time.monotonic()
        [job] = cluster.start("Job", "coordinator", extra_args=TRIAL)
        first_wait(job)  # the Job got going first (nothing resolves yet), as a scheduler may have it
        pods = {(kind, name): cluster.start(kind, name) for kind, name in
                (*SERVICES, ("Deployment", "worker"))}
        stop = threading.Event()
        with ThreadPoolExecutor(1) as pool:
            watching = pool.submit(watch_workers, cluster, pods[("Deployment", "worker")], stop)
            for kind, name in SERVICES:
                timings[name] = max(cluster.wait_ready(kind, name, pod, timeout_s=300)
                                    for pod in pods[(kind, name)])
            code = int(docker("wait", job, timeout=900).stdout.strip())
            timings["job"] = time.monotonic() - t0
            stop.set()
            probes = watching.result()
        logs = docker("logs", job)
        log = logs.stdout + logs.stderr  # the table (stdout), then the progress lines (stderr)
        [reader] = cluster.start("Pod", "runs-reader")
        cluster.wait_ready("Pod", "runs-reader", reader, timeout_s=60)
        cluster.copy_out(reader, "/data/runs", dest)
    assert cluster.leftovers() == [], "containers, volumes or networks left behind"
    workers = [pod.removeprefix(f"{cluster.network}-") for pod in pods[("Deployment", "worker")]]
    return Outcome(code, log, timings, workers, probes)


def check_worker_probes(probes: list[Probe], workers: list[str], trials: list[dict[str, Any]]) -> None:
    """Every worker became ready, and its probe never failed after that, trials included."""
    ready = {w: min((p.at_ns for p in probes if p.pod == w and p.ok), default=None) for w in workers}
    assert None not in ready.values(), f"never ready: {[w for w, at in ready.items() if at is None]}"
    failed = [p for p in probes if not p.ok and p.at_ns > (ready[p.pod] or 0)]
    during = [p for p in probes if any(t["start_ns"] <= p.at_ns <= t["window_end_ns"] for t in trials)]
    print(f"worker probes: {len(probes)}, {len(during)} during trials, {len(failed)} failed once ready")
    assert failed == [], failed[:5]
    assert len(during) >= 2, "the probe hardly ran while trials ran: nothing shown"


def test_base_manifests_run_as_containers(container_images: Images, tmp_path: Path) -> None:
    outcome = run_the_manifests(container_images, tmp_path)
    log, workers = outcome.log, outcome.workers
    print(log)
    print(f"ready after (s): {json.dumps({k: round(v, 1) for k, v in outcome.ready_s.items()})}")
    assert outcome.code == 0, log[-4000:]
    # the Job started before its services: names that did not resolve yet, an origin that was
    # initialising; it waited, saying for what, then went on
    assert "waiting for --origin-dsn postgresql://stampede@origin:5432/stampede" in log, log[:3000]
    assert re.search(r"Name or service not known|Temporary failure in name resolution", log)
    [run] = [p for p in (tmp_path / "runs").iterdir() if (p / "run.json").exists()]
    meta = json.loads((run / "run.json").read_text())
    check_worker_probes(outcome.probes, workers, meta["trials"])
    assert PASSWORD not in log and PASSWORD not in (run / "run.json").read_text()
    assert meta["status"] == "complete" and meta["spec"]["workers"] == 8
    assert {w.split("@")[1] for w in meta["clock_offsets"]} == set(workers)  # worker@<pod name>
    assert all(o["uncertainty_ns"] > 0 for o in meta["clock_offsets"].values())
    requests = ds.dataset(run / "requests", format="parquet", partitioning="hive").to_table()
    assert set(requests.column_names) >= REQUEST_COLUMNS
    assert len(set(requests.column("worker").to_pylist())) == 8
    trials = {t["strategy"]: t for t in pq.read_table(run / "trials.parquet").to_pylist()}
    assert set(trials["naive"]) >= TRIAL_COLUMNS
    assert all(t["db_calls_match"] for t in trials.values()), trials
    assert trials["naive"]["origin_per_expiry"] >= 4 * trials["lock"]["origin_per_expiry"], trials
    assert trials["lock"]["origin_per_expiry"] <= 3, trials
    memcached = trials["meta-memcache"]
    assert memcached["cache_server"] == "memcached" and memcached["expiry_source"] == "server"
    assert memcached["expiry_events"] >= 1 and memcached["origin_per_expiry"] <= 1.5, memcached
    assert meta["services"]["memcache_url"] == "memcache://memcached:11211"
