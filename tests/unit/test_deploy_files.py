"""docker-compose.yml, Dockerfile and k8s/ checked offline: schemas, rendering, and that every
command, option, module and STAMPEDE_* variable they use exists in the code."""

from __future__ import annotations

import importlib
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import click
import pytest
import yaml

from coordinator.cli.app_options import APP_URL_ENV, FRONT_URL_ENV
from coordinator.cli.commands import cli
from coordinator.stack.http_caches.render import render as render_front
from model.apptier import APP_ENV
from model.services import ENV, METRICS_ADDR_ENV, METRICS_PORT_ENV, OPTIONAL_ENV
from tests.helpers import ROOT
from tests.kustomize_lite import by_name, containers, load_docs, render

K8S = ROOT / "k8s"
COMPOSE = ROOT / "docker-compose.yml"
BIN = Path(sys.executable).parent
OVERLAYS = sorted(p for p in (K8S / "overlays").iterdir() if (p / "kustomization.yaml").exists())
# Programs of the third-party images (redis, postgres, memcached, nginx, varnish) and the shells:
# not ours to check.
EXTERNAL = {"redis-server", "redis-cli", "postgres", "pg_isready", "memcached", "nginx", "varnishd",
            "bash", "sleep", "test"}


def manifest_files() -> list[Path]:
    return sorted(p for p in K8S.rglob("*.yaml") if p.name != "kustomization.yaml")


def validate(files: list[Path]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "kubernetes-validate"), "--strict", *map(str, files)],
                          capture_output=True, text=True, timeout=300, check=False)


def test_every_manifest_and_rendered_overlay_passes_strict_schema(tmp_path: Path) -> None:
    files = manifest_files()
    for overlay in OVERLAYS:
        rendered = tmp_path / f"{overlay.name}.yaml"
        rendered.write_text(yaml.safe_dump_all(render(overlay)))
        files.append(rendered)
    done = validate(files)
    assert done.returncode == 0, done.stdout + done.stderr
    documents = sum(len(load_docs(f)) for f in files)
    assert done.stdout.count(" passed ") + done.stderr.count(" passed ") == documents


def test_schema_check_rejects_an_unknown_field(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    doc = load_docs(K8S / "base" / "worker.yaml")[0]
    doc["spec"]["template"]["spec"]["containers"][0]["comand"] = ["typo"]
    bad.write_text(yaml.safe_dump(doc))
    assert validate([bad]).returncode != 0


def check_compose(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "check-jsonschema"), "--builtin-schema", "vendor.compose-spec",
                           str(path)], capture_output=True, text=True, timeout=120, check=False)


def test_compose_file_passes_the_compose_spec(tmp_path: Path) -> None:
    done = check_compose(COMPOSE)
    assert done.returncode == 0, done.stdout + done.stderr
    bad = tmp_path / "docker-compose.yml"
    bad.write_text(COMPOSE.read_text().replace("    healthcheck:", "    healthcheckk:", 1))
    assert check_compose(bad).returncode != 0


PROJECT_IMAGE = "stampede-lab"
KUSTOMIZATIONS = [K8S / "base", *OVERLAYS, K8S / "tools"]


@pytest.mark.parametrize("directory", KUSTOMIZATIONS, ids=lambda p: p.name)
def test_project_image_is_not_pulled_when_present(directory: Path) -> None:
    """No pull policy on a :latest image means Always: `kind load` would not help (ImagePullBackOff)."""
    ours = [c for c in containers(render(directory)) if c["image"].split(":")[0] == PROJECT_IMAGE]
    assert ours, f"{directory.name} runs no container of the project image"
    assert all(c.get("imagePullPolicy") == "IfNotPresent" for c in ours), [c["name"] for c in ours]


def test_runs_reader_is_reached_by_kustomize_edit_set_image() -> None:
    tools, base = (yaml.safe_load((K8S / d / "kustomization.yaml").read_text()) for d in ("tools", "base"))
    assert tools["resources"] == ["runs-reader.yaml"] and tools["namespace"] == "stampede-lab"
    assert tools["images"] == base["images"]  # one `kustomize edit set image` per directory, kept equal
    [reader] = containers(render(K8S / "tools"))
    assert reader["image"] == "stampede-lab:latest"


def test_set_image_reaches_the_runs_reader(tmp_path: Path) -> None:
    """What `kustomize edit set image stampede-lab=registry.example/stampede-lab:v1` writes."""
    tools = tmp_path / "tools"
    shutil.copytree(K8S / "tools", tools)
    kust = yaml.safe_load((tools / "kustomization.yaml").read_text())
    kust["images"] = [{"name": "stampede-lab", "newName": "registry.example/stampede-lab", "newTag": "v1"}]
    (tools / "kustomization.yaml").write_text(yaml.safe_dump(kust))
    rendered = render(tools)
    assert [c["image"] for c in containers(rendered)] == ["registry.example/stampede-lab:v1"]
    if shutil.which("kubectl"):
        done = subprocess.run(["kubectl", "kustomize", str(tools)], capture_output=True, text=True,
                              timeout=60, check=True)
        assert [d for d in yaml.safe_load_all(done.stdout) if d] == rendered


def test_coordinator_job_waits_for_services_started_with_it() -> None:
    """One `kubectl apply -k` starts the Job with the services, and it is never retried
    (backoffLimit 0): it must wait for them (coordinator/probe.py) longer than a first initdb."""
    job = by_name(render(K8S / "base"))[("Job", "coordinator")]
    args = job["spec"]["template"]["spec"]["containers"][0]["args"]
    assert job["spec"]["backoffLimit"] == 0
    assert float(args[args.index("--service-timeout") + 1]) >= 300, args


def test_the_origin_password_is_written_once_and_never_in_a_url() -> None:
    """The Secret holds only POSTGRES_PASSWORD; the DSN has none; our pods get it as PGPASSWORD
    (libpq reads it), so a password with `@` or `/` needs no URL encoding."""
    docs = render(K8S / "base")
    named = by_name(docs)
    secret = named[("Secret", "stampede-secret")]
    assert list(secret["stringData"]) == ["POSTGRES_PASSWORD"]
    password = secret["stringData"]["POSTGRES_PASSWORD"]
    assert yaml.safe_dump_all(docs).count(password) == 1
    dsn = named[("ConfigMap", "stampede-config")]["data"]["STAMPEDE_ORIGIN_DSN"]
    assert dsn == "postgresql://stampede@origin:5432/stampede" and urlsplit(dsn).password is None
    from_secret = {"valueFrom": {"secretKeyRef": {"name": "stampede-secret", "key": "POSTGRES_PASSWORD"}}}
    for kind, name, variable in (("Deployment", "worker", "PGPASSWORD"), ("Job", "coordinator", "PGPASSWORD"),
                                 ("StatefulSet", "origin", "POSTGRES_PASSWORD")):
        [container] = named[(kind, name)]["spec"]["template"]["spec"]["containers"]
        assert {"name": variable, **from_secret} in container["env"], f"{kind}/{name}"


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl absent: Python rendering only")
@pytest.mark.parametrize("directory", KUSTOMIZATIONS, ids=lambda p: p.name)
def test_python_rendering_agrees_with_kubectl(directory: Path) -> None:
    done = subprocess.run(["kubectl", "kustomize", str(directory)], capture_output=True, text=True,
                          timeout=60, check=True)
    theirs = [d for d in yaml.safe_load_all(done.stdout) if d]
    key = lambda d: (d["kind"], d["metadata"]["name"])  # noqa: E731
    assert sorted(theirs, key=key) == sorted(render(directory), key=key)


# --- every command, option, module and variable used exists in the code ---------------------

# Where memcached is selected (k8s/components/memcached), its URL is required too.
RENDERS = {"base": False, "tools": False, "overlays/memcached": True}


def _containers() -> Iterator[tuple[str, dict[str, Any], dict[str, set[str]], bool]]:
    """(where, container, the keys of each ConfigMap / Secret, whether memcached is selected)."""
    for directory, memcached in RENDERS.items():
        docs = render(K8S / directory)
        keys = {d["metadata"]["name"]: {*d.get("data", {}), *d.get("stringData", {})}
                for d in docs if d["kind"] in ("ConfigMap", "Secret")}
        for doc in docs:
            spec = doc.get("spec", {})
            pod = spec.get("template", {}).get("spec", spec)
            for container in pod.get("containers", []):
                yield f"{directory}:{doc['kind']}/{doc['metadata']['name']}", container, keys, memcached
    compose = yaml.safe_load(COMPOSE.read_text())  # memcached: a profile and a variable, see below
    for name, service in compose["services"].items():
        yield f"compose/{name}", {"command": service.get("command", []),
                                  "env": service.get("environment") or {}}, {}, False


def _argvs(container: dict[str, Any]) -> Iterator[list[str]]:
    argv = [*container.get("command", []), *container.get("args", [])]
    probe = container.get("readinessProbe", {}).get("exec", {}).get("command", [])
    for cmd in (argv, probe):
        if cmd[:2] == ["sh", "-c"]:
            yield shlex.split(cmd[2])
        elif cmd[:1] == ["CMD-SHELL"]:
            yield shlex.split(cmd[1])
        elif cmd:
            yield cmd


def check_argv(argv: list[str]) -> None:
    program = argv[0]
    if program == "coordinator":
        command = cli.commands[argv[1]]  # KeyError: no such subcommand
        known = {o for p in command.params if isinstance(p, click.Option)
                 for o in (*p.opts, *p.secondary_opts)}
        unknown = [a for a in argv[2:] if a.startswith("--") and a not in known]
        assert not unknown, f"coordinator {argv[1]} has no {unknown}"
    elif program == "celery":
        importlib.import_module(argv[argv.index("-A") + 1])
        assert argv[argv.index("-A") + 2] in ("worker", "inspect")
    elif argv[:2] == ["python", "-m"]:
        importlib.import_module(argv[2])
    else:
        assert program in EXTERNAL, f"unknown program {program}"


def _env_names(container: dict[str, Any], keys: dict[str, set[str]]) -> set[str]:
    names = {e["name"] for e in container.get("env", []) if isinstance(e, dict)}
    names |= set(container["env"]) if isinstance(container.get("env"), dict) else set()
    for ref in container.get("envFrom", []):
        names |= keys[(ref.get("configMapRef") or ref.get("secretRef"))["name"]]
    return names


def test_commands_options_modules_and_variables_exist() -> None:
    """Every STAMPEDE_* variable is one the code reads; the four services' always, the optional
    ones (STAMPEDE_MEMCACHE_URL) where memcached is selected."""
    checked, known = 0, set(ENV.values()) | set(OPTIONAL_ENV.values()) | set(APP_ENV.values())
    known |= {APP_URL_ENV, *FRONT_URL_ENV.values()}
    for where, container, keys, memcached in _containers():
        for argv in _argvs(container):
            try:
                check_argv(argv)
            except (KeyError, ValueError, ImportError) as exc:
                pytest.fail(f"{where}: {argv}: {exc!r}")
            checked += 1
        env = _env_names(container, keys)
        stampede = {n for n in env if n.startswith("STAMPEDE_")} - {METRICS_PORT_ENV, METRICS_ADDR_ENV}
        assert stampede <= known, f"{where}: unknown {stampede - known}"
        uses_ours = any(a[0] in ("celery", "coordinator") for a in _argvs(container))
        if uses_ours and not where.endswith("Pod/runs-reader"):
            required = set(ENV.values()) | (set(OPTIONAL_ENV.values()) if memcached else set())
            assert required <= stampede, f"{where} lacks {required - stampede}"
    assert checked >= 10


# --- the HTTP caches run what the renderers wrote ------------------------------------------

HTTP_CACHES = {"nginx": ("stampede-nginx", "nginx.conf"), "varnish": ("stampede-varnish", "default.vcl")}


@pytest.mark.parametrize("front", sorted(HTTP_CACHES))
def test_http_caches_run_the_renderers_configuration_on_8080(front: str) -> None:
    """One source of configuration truth: the ConfigMap holds what
    ``python -m coordinator.stack.http_caches.render FRONT`` prints (the compose services mount
    deploy/http-caches/, checked against it in test_http_caches_config.py), and each container
    reads the file mounted from it; its Service and probe use the port the configuration listens on."""
    configmap, filename = HTTP_CACHES[front]
    named = by_name(render(K8S / "overlays" / "http-caches"))
    assert named[("ConfigMap", configmap)]["data"] == {filename: render_front(front)}
    pod = named[("Deployment", front)]["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert f"/etc/stampede/{filename}" in container["command"]
    mount = next(m for m in container["volumeMounts"] if m["mountPath"] == "/etc/stampede")
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    assert volume["configMap"]["name"] == configmap
    assert container["readinessProbe"]["httpGet"]["path"] == "/stampede/floor"
    assert named[("Service", front)]["spec"]["ports"][0]["port"] == 8080
    assert "0.0.0.0:8080" in render_front(front) or "0.0.0.0:8080" in container["command"]


def test_dockerfile_runs_our_worker_on_python_311_slim() -> None:
    """The public base stays the default; ``--build-arg BASE=`` selects another (a local one here)."""
    text = (ROOT / "Dockerfile").read_text()
    assert "ARG BASE=python:3.11-slim\n" in text and "FROM ${BASE} AS runtime" in text
    cmd = yaml.safe_load(text.split("CMD", 1)[1].replace("\\\n", ""))
    check_argv(cmd)
    assert "USER 10001" in text
    with pytest.raises(KeyError):
        check_argv(["coordinator", "no-such-command"])
    with pytest.raises(AssertionError):
        check_argv(["coordinator", "launch", "--no-such-option"])


def test_dockerfile_copies_every_package_the_runtime_imports() -> None:
    text = (ROOT / "Dockerfile").read_text()
    for package in ("coordinator", "model", "worker", "strategies", "results", "simulate"):
        assert f"COPY {package} /src/{package}" in text, f"the image lacks {package}/"
    assert "COPY README.md /src/" in text  # the package description
    assert "-c /src/constraints.txt -r /src/requirements.txt" in text  # pinned versions


def test_dockerignore_keeps_the_venv_runs_and_caches_out() -> None:
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    ignored = {ln.strip() for ln in lines if ln.strip() and not ln.startswith("#")}
    assert {".venv", "runs", ".git", ".env", "**/__pycache__", ".mypy_cache", ".pytest_cache"} <= ignored
    assert not {"deploy", "README.md", "constraints.txt", "deploy/wheels"} & ignored
