"""docker-compose.yml offline: what Compose v1 (1.29) and v2 both accept, images chosen through
variables whose defaults are the public images, the password written once and never in a URL,
a worker healthcheck that answers during a trial. The file run for real: tests/e2e/test_containers.py."""

from __future__ import annotations

import importlib
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from tests.helpers import ROOT

COMPOSE = ROOT / "docker-compose.yml"
TEXT = COMPOSE.read_text()
SERVICES: dict[str, Any] = yaml.safe_load(TEXT)["services"]
PUBLIC = {"cache": "redis:7.2", "locks": "redis:7.2", "broker": "redis:7.2", "origin": "postgres:15",
          "memcached": "memcached:1.6", "worker": "stampede-lab:latest",
          "coordinator": "stampede-lab:latest", "nginx": "nginx:1.22", "varnish": "varnish:7.1"}
VARIABLE = {"redis:7.2": "REDIS_IMAGE", "postgres:15": "POSTGRES_IMAGE",
            "memcached:1.6": "MEMCACHED_IMAGE", "stampede-lab:latest": "STAMPEDE_IMAGE",
            "nginx:1.22": "NGINX_IMAGE", "varnish:7.1": "VARNISH_IMAGE"}


def test_no_top_level_name_compose_v1_rejects_it() -> None:
    assert "name" not in yaml.safe_load(TEXT)
    assert "COMPOSE_PROJECT_NAME=stampede-lab" in (ROOT / ".env.example").read_text()


@pytest.mark.parametrize("service", sorted(PUBLIC))
def test_images_come_from_variables_whose_defaults_are_public(service: str) -> None:
    public = PUBLIC[service]
    assert SERVICES[service]["image"] == f"${{{VARIABLE[public]}:-{public}}}"


def test_the_image_builds_from_the_public_base_by_default() -> None:
    build = SERVICES["worker"]["build"]
    assert build == {"context": ".", "args": {"BASE": "${STAMPEDE_BASE:-python:3.11-slim}"}}


def _uses_of_password() -> list[str]:
    return re.findall(r"^\s*(\w+): .*\$\{POSTGRES_PASSWORD", TEXT, flags=re.MULTILINE)


def test_the_password_is_never_in_a_url() -> None:
    """One variable, POSTGRES_PASSWORD; libpq gets it as PGPASSWORD, the exporter as DATA_SOURCE_PASS:
    a password with `@` or `/` needs no encoding (in a URL psycopg would read `p@ss` as `p`)."""
    assert sorted(_uses_of_password()) == ["DATA_SOURCE_PASS", "PGPASSWORD", "POSTGRES_PASSWORD"]
    env = SERVICES["worker"]["environment"]
    dsn = env["STAMPEDE_ORIGIN_DSN"]
    assert dsn == "postgresql://${POSTGRES_USER:-stampede}@origin:5432/${POSTGRES_DB:-stampede}"
    assert SERVICES["coordinator"]["environment"] == env
    exporter = SERVICES["origin-exporter"]["environment"]
    assert "DATA_SOURCE_NAME" not in exporter and "@" not in exporter["DATA_SOURCE_URI"]
    for value in (v for s in SERVICES.values() for v in (s.get("environment") or {}).values()):
        assert "POSTGRES_PASSWORD" not in str(value) or str(value).startswith("${POSTGRES_PASSWORD")


def test_origin_reads_no_env_file() -> None:
    """``env_file: .env`` would tie the origin to one file; --env-file and the shell select it."""
    assert "env_file" not in SERVICES["origin"]
    assert SERVICES["origin"]["environment"]["POSTGRES_PASSWORD"].startswith("${POSTGRES_PASSWORD:?")


@pytest.mark.parametrize(("service", "filename"), [("nginx", "nginx.conf"), ("varnish", "default.vcl")])
def test_http_caches_mount_the_rendered_config_in_front_of_the_app(service: str, filename: str) -> None:
    """The file each reads is deploy/http-caches/'s (the renderer's output: test_http_caches_config.py),
    mounted read-only; it starts after the app tier answers and probes its own floor on 8080."""
    spec = SERVICES[service]
    source = f"./deploy/http-caches/{filename}"
    assert f"{source}:/etc/stampede/{filename}:ro" in spec["volumes"]
    assert (ROOT / source).is_file()
    assert f"/etc/stampede/{filename}" in spec["command"]
    assert spec["depends_on"] == {"app": {"condition": "service_healthy"}}
    assert spec["profiles"] == ["http"]
    probe = spec["healthcheck"]["test"]
    assert probe[:3] == ["CMD", "bash", "-c"] and "/dev/tcp/127.0.0.1/8080" in probe[3]
    assert "/stampede/floor" in probe[3] and "' 204 '" in probe[3]


def test_worker_healthcheck_is_the_beat_probe_with_tunable_timings() -> None:
    check = SERVICES["worker"]["healthcheck"]
    assert check["test"] == ["CMD", "python", "-m", "worker.health"]
    importlib.import_module(check["test"][-1])
    for key, variable in (("interval", "WORKER_HEALTH_INTERVAL"), ("timeout", "WORKER_HEALTH_TIMEOUT"),
                          ("start_period", "WORKER_HEALTH_START_PERIOD")):
        assert check[key].startswith(f"${{{variable}:-"), key


@pytest.mark.skipif(shutil.which("docker-compose") is None, reason="docker-compose (v1) not installed")
def test_compose_v1_accepts_the_file(tmp_path: Path) -> None:
    env = tmp_path / ".env"
    env.write_text("POSTGRES_PASSWORD=Pa55@host/db:x\nSTAMPEDE_IMAGE=local/x:1\n")
    done = subprocess.run(["docker-compose", "--env-file", str(env), "-f", str(COMPOSE), "config"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    config = yaml.safe_load(done.stdout)["services"]
    assert config["worker"]["image"] == "local/x:1" and config["cache"]["image"] == "redis:7.2"
    assert config["worker"]["environment"]["PGPASSWORD"] == "Pa55@host/db:x"
    dsn = config["worker"]["environment"]["STAMPEDE_ORIGIN_DSN"]
    assert dsn == "postgresql://stampede@origin:5432/stampede" and urlsplit(dsn).password is None
