"""The observe profile (compose), the k8s component and the Grafana provisioning, checked offline."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from coordinator.observe import dashboard
from tests.helpers import ROOT

DEPLOY = ROOT / "deploy"
COMPONENT = ROOT / "k8s" / "components" / "observe"
OBSERVE_SERVICES = {"prometheus", "grafana", "cache-exporter", "locks-exporter", "broker-exporter",
                    "origin-exporter"}


def test_compose_profile_observe_runs_prometheus_grafana_and_exporters() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    in_profile = {n for n, s in services.items() if "observe" in s.get("profiles", [])}
    assert in_profile == OBSERVE_SERVICES
    for name in ("worker", "coordinator"):
        assert services[name]["environment"]["STAMPEDE_METRICS_PORT"]
    mounts = services["grafana"]["volumes"]
    assert "./deploy/grafana/provisioning:/etc/grafana/provisioning:ro" in mounts
    for volume in mounts + services["prometheus"]["volumes"] + services["origin-exporter"]["volumes"]:
        source = volume.split(":")[0]
        assert not source.startswith("./") or (ROOT / source).exists(), volume
    assert all(p.startswith("127.0.0.1:") for s in in_profile for p in services[s].get("ports", []))


def test_prometheus_config_scrapes_every_compose_target() -> None:
    config = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    assert config["global"]["scrape_interval"] == "1s"
    hosts = {t.split(":")[0] for job in config["scrape_configs"]
             for static in job.get("static_configs", []) for t in static["targets"]}
    hosts |= {n for job in config["scrape_configs"] for sd in job.get("dns_sd_configs", [])
              for n in sd["names"]}
    services = set(yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"])
    assert hosts <= services and {"worker", "coordinator"} <= hosts


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool absent (apt-get install prometheus)")
def test_promtool_accepts_the_prometheus_config() -> None:
    done = subprocess.run(["promtool", "check", "config", "--syntax-only",
                           str(DEPLOY / "prometheus" / "prometheus.yml")],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_grafana_provisioning_matches_the_dashboard() -> None:
    provisioning = DEPLOY / "grafana" / "provisioning"
    source = yaml.safe_load((provisioning / "datasources" / "prometheus.yaml").read_text())
    uids = {d["uid"] for d in source["datasources"] if d["type"] == "prometheus"}
    variables = {v["name"]: v for v in dashboard.load()["templating"]["list"]}
    assert variables["datasource"]["current"]["value"] in uids
    provider = yaml.safe_load((provisioning / "dashboards" / "stampede.yaml").read_text())
    grafana = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]["grafana"]
    path = provider["providers"][0]["options"]["path"]
    assert f"./deploy/grafana/dashboards:{path}:ro" in grafana["volumes"]


def test_k8s_component_dashboard_is_the_repository_one() -> None:
    assert json.loads((COMPONENT / "stampede.json").read_text()) == dashboard.load()


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl absent (renders the component)")
def test_k8s_component_renders_scrapable_pods_and_the_dashboard(tmp_path: Path) -> None:
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    rel = lambda p: os.path.relpath(p, overlay)  # noqa: E731 - kustomize wants relative paths
    (overlay / "kustomization.yaml").write_text(yaml.safe_dump(
        {"resources": [rel(ROOT / "k8s" / "base")], "components": [rel(COMPONENT)]}))
    done = subprocess.run(["kubectl", "kustomize", str(overlay)], capture_output=True, text=True,
                          timeout=60, check=True)
    docs = {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(done.stdout) if d}
    for kind, name in (("Deployment", "worker"), ("Job", "coordinator")):
        pod = docs[(kind, name)]["spec"]["template"]
        assert pod["metadata"]["annotations"]["prometheus.io/scrape"] == "true"
        container = pod["spec"]["containers"][0]
        assert {"name": "metrics", "containerPort": 9100} in container["ports"]
        assert {"name": "STAMPEDE_METRICS_PORT", "value": "9100"} in container["env"]
    maps = docs[("ConfigMap", "stampede-grafana-dashboards")]
    assert maps["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(maps["data"]["stampede.json"]) == dashboard.load()
    rendered = tmp_path / "rendered.yaml"
    rendered.write_text(done.stdout)
    checked = subprocess.run([str(Path(sys.executable).parent / "kubernetes-validate"), "--strict",
                              str(rendered)], capture_output=True, text=True, timeout=300, check=False)
    assert checked.returncode == 0, checked.stdout + checked.stderr
