"""The memcached healthcheck (docker-compose.yml) and readiness probe (k8s/components/memcached),
run by bash against real servers: pass on memcached, fail on a closed port and on a server that
answers something else (Redis). Only the port is changed (the probes ask 127.0.0.1:11211)."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from urllib.parse import urlsplit

import pytest
import yaml

from coordinator.stack.processes import free_port
from tests.helpers import ROOT

COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]["memcached"]
[K8S] = [d for d in yaml.safe_load_all((ROOT / "k8s/components/memcached/memcached.yaml").read_text())
         if d["kind"] == "Deployment"]
PROBES = {
    # compose writes $$ for a literal $ in the file
    "compose": [a.replace("$$", "$") for a in COMPOSE["healthcheck"]["test"][1:]],
    "k8s": K8S["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["exec"]["command"],
}


def probe(which: str, port: int) -> subprocess.CompletedProcess[str]:
    argv = [a.replace("/127.0.0.1/11211", f"/127.0.0.1/{port}") for a in PROBES[which]]
    assert argv != PROBES[which], "the probe no longer asks 127.0.0.1:11211"
    return subprocess.run(argv, capture_output=True, text=True, timeout=10, check=False)


@pytest.mark.parametrize("which", sorted(PROBES))
def test_probe_passes_on_memcached_only(which: str, memcached_url: str,
                                        redis_server: Callable[[str], str]) -> None:
    port = urlsplit(memcached_url).port
    assert port is not None
    assert probe(which, port).returncode == 0, probe(which, port).stderr
    assert probe(which, free_port()).returncode != 0  # nothing listening
    redis_port = urlsplit(redis_server("cache")).port
    assert redis_port is not None
    assert probe(which, redis_port).returncode != 0  # answers, but not VERSION
