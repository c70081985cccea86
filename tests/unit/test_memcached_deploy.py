"""memcached in docker-compose.yml and k8s/, offline: selected by a profile and a variable (compose)
or a component (k8s), nothing changed when unused, its URL naming its own service and port, and
sized as the embedded stack's. Its probes against a real server: tests/integration/
test_memcached_probes.py; the stack run for real: tests/e2e/test_containers.py."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from coordinator.stack.memcached import CONNECTIONS, MEMORY_MB
from model.memcache import DEFAULT_PORT
from model.services import OPTIONAL_ENV
from tests.helpers import ROOT
from tests.kustomize_lite import by_name, render

COMPOSE = ROOT / "docker-compose.yml"
SERVICES: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())["services"]
K8S = ROOT / "k8s"
VARIABLE = OPTIONAL_ENV["memcache_url"]  # STAMPEDE_MEMCACHE_URL
URL = "memcache://memcached:11211"
SIZING = ["memcached", "-m", str(MEMORY_MB), "-c", str(CONNECTIONS), "-U", "0"]


def test_compose_memcached_is_a_profile_nothing_depends_on() -> None:
    memcached = SERVICES["memcached"]
    assert memcached["profiles"] == ["memcached"]
    assert memcached["image"] == "${MEMCACHED_IMAGE:-memcached:1.6}"
    assert memcached["command"] == SIZING
    assert memcached["healthcheck"]["test"][:2] == ["CMD", "bash"]  # no nc or python in the image
    assert [n for n, s in SERVICES.items() if "memcached" in (s.get("depends_on") or [])] == []
    for name in ("worker", "coordinator"):  # empty unless set: no memcached, nothing probed
        assert SERVICES[name]["environment"][VARIABLE] == f"${{{VARIABLE}:-}}"


def _compose_config(tmp_path: Path, lines: str) -> dict[str, Any]:
    env = tmp_path / ".env"
    env.write_text(f"POSTGRES_PASSWORD=x\n{lines}")
    done = subprocess.run(["docker-compose", "--env-file", str(env), "-f", str(COMPOSE), "config"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    services: dict[str, Any] = yaml.safe_load(done.stdout)["services"]
    return services


@pytest.mark.skipif(shutil.which("docker-compose") is None, reason="docker-compose (v1) not installed")
def test_compose_v1_selects_memcached_with_the_two_lines_of_env(tmp_path: Path) -> None:
    off = _compose_config(tmp_path, "")
    assert off["worker"]["environment"][VARIABLE] == "" == off["coordinator"]["environment"][VARIABLE]
    on = _compose_config(tmp_path, f"COMPOSE_PROFILES=memcached\n{VARIABLE}={URL}\n"
                                   "MEMCACHED_IMAGE=local/memcached:1\n")
    assert on["worker"]["environment"][VARIABLE] == URL == on["coordinator"]["environment"][VARIABLE]
    assert on["memcached"]["image"] == "local/memcached:1"
    parts = urlsplit(URL)
    assert parts.hostname in on and "-p" not in on["memcached"]["command"]
    assert parts.port == DEFAULT_PORT  # memcached's own default port: the service listens on it


def test_k8s_base_and_single_node_have_no_memcached() -> None:
    for directory in (K8S / "base", K8S / "overlays" / "single-node"):
        docs = by_name(render(directory))
        assert not [key for key in docs if key[1] == "memcached"]
        assert VARIABLE not in docs[("ConfigMap", "stampede-config")]["data"]


@pytest.mark.parametrize("overlay", ["memcached", "single-node-memcached"])
def test_k8s_component_url_names_its_service_and_port(overlay: str) -> None:
    docs = by_name(render(K8S / "overlays" / overlay))
    url = urlsplit(docs[("ConfigMap", "stampede-config")]["data"][VARIABLE])
    service, deployment = docs[("Service", str(url.hostname))], docs[("Deployment", "memcached")]
    assert service["metadata"]["namespace"] == deployment["metadata"]["namespace"] == "stampede-lab"
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    [port] = service["spec"]["ports"]
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    named = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert port["port"] == url.port == named[port["targetPort"]] == DEFAULT_PORT
    assert container["args"] == SIZING == SERVICES["memcached"]["command"]
    assert container["image"] == "memcached:1.6"
    assert deployment["spec"]["template"]["spec"]["securityContext"]["runAsUser"] == 11211


def test_k8s_memcached_sits_on_the_cache_node() -> None:
    docs = by_name(render(K8S / "overlays" / "memcached"))
    affinity = [docs[("Deployment", name)]["spec"]["template"]["spec"]["affinity"]
                for name in ("cache", "memcached")]
    assert affinity[0] == affinity[1]  # stampede-lab/role=cache: the cache under test, either server
