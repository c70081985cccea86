"""Where the k8s/ pods go and what they ask for, offline: services pinned to node roles, workers
spread, the one-node overlays without affinity, and requests that fit a default minikube node."""

from __future__ import annotations

from typing import Any

import pytest

from tests.helpers import ROOT
from tests.kustomize_lite import by_name, render

K8S = ROOT / "k8s"


def _workers_option(job: dict[str, Any]) -> int:
    args = job["spec"]["template"]["spec"]["containers"][0]["args"]
    return int(args[args.index("--workers") + 1])


def test_base_pins_services_to_nodes_and_spreads_workers() -> None:
    docs = by_name(render(K8S / "base"))
    for kind, name, role in (("Deployment", "cache", "cache"), ("Deployment", "locks", "locks"),
                             ("StatefulSet", "origin", "origin")):
        terms = docs[(kind, name)]["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        assert terms[0]["matchExpressions"][0] == {
            "key": "stampede-lab/role", "operator": "In", "values": [role]}
    worker = docs[("Deployment", "worker")]
    assert worker["spec"]["template"]["spec"]["topologySpreadConstraints"]
    assert worker["spec"]["replicas"] == _workers_option(docs[("Job", "coordinator")]) == 8
    assert all(d["metadata"].get("namespace") == "stampede-lab"
               for d in docs.values() if d["kind"] != "Namespace")


SINGLE_NODE = {"single-node": 1000, "single-node-memcached": 1050}  # CPU (m) each may request


@pytest.mark.parametrize("overlay", sorted(SINGLE_NODE))
def test_single_node_overlay_drops_affinity_and_matches_workers(overlay: str) -> None:
    docs = by_name(render(K8S / "overlays" / overlay))
    assert all("affinity" not in d["spec"].get("template", {}).get("spec", {}) for d in docs.values()
               if d["kind"] in ("Deployment", "StatefulSet"))
    assert docs[("Deployment", "worker")]["spec"]["replicas"] == _workers_option(
        docs[("Job", "coordinator")]) == 8


def millicores(value: str | int) -> float:
    text = str(value)
    return float(text[:-1]) if text.endswith("m") else float(text) * 1000


def mebibytes(value: str) -> float:
    units = {"Gi": 1024.0, "Mi": 1.0}
    return float(value[:-2]) * units[value[-2:]]


def requested(docs: list[dict[str, Any]]) -> tuple[float, float]:
    """Sum of CPU (millicores) and memory (MiB) requests over every pod the workloads make."""
    cpu = mem = 0.0
    for doc in docs:
        spec = doc.get("spec", {})
        if "template" not in spec:
            continue
        pods = int(spec.get("replicas", spec.get("parallelism", 1)))
        for container in spec["template"]["spec"]["containers"]:
            cpu += pods * millicores(container["resources"]["requests"]["cpu"])
            mem += pods * mebibytes(container["resources"]["requests"]["memory"])
    return cpu, mem


@pytest.mark.parametrize("overlay", sorted(SINGLE_NODE))
def test_single_node_overlay_fits_a_default_two_cpu_minikube_node(overlay: str) -> None:
    """minikube's smallest default node: 2 CPUs, 2,200 MB; its control plane requests about 750m CPU
    and 170Mi."""
    cpu, mem = requested(render(K8S / "overlays" / overlay))
    assert cpu <= SINGLE_NODE[overlay], f"{overlay} requests {cpu:.0f}m CPU (8 workers included)"
    assert mem <= 1792, f"{overlay} requests {mem:.0f}Mi memory"
    assert requested(render(K8S / "base")) == (7000.0, 4352.0)  # the base: a node per role
