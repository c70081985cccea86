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

import click
import pytest
import yaml

from coordinator.cli.commands import cli
from model.services import ENV, METRICS_ADDR_ENV, METRICS_PORT_ENV
from tests.helpers import ROOT
from tests.kustomize_lite import load_docs, render

K8S = ROOT / "k8s"
COMPOSE = ROOT / "docker-compose.yml"
BIN = Path(sys.executable).parent
OVERLAYS = sorted(p for p in (K8S / "overlays").iterdir() if (p / "kustomization.yaml").exists())
# Programs of the third-party images (redis, postgres) and the shell: not ours to check.
EXTERNAL = {"redis-server", "redis-cli", "postgres", "pg_isready", "sleep", "test"}


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


def _by_name(docs: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    out = {(d["kind"], d["metadata"]["name"]): d for d in docs}
    assert len(out) == len(docs), "a kind/name pair appears twice"
    return out


def _workers_option(job: dict[str, Any]) -> int:
    args = job["spec"]["template"]["spec"]["containers"][0]["args"]
    return int(args[args.index("--workers") + 1])


def test_base_pins_services_to_nodes_and_spreads_workers() -> None:
    docs = _by_name(render(K8S / "base"))
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


def test_single_node_overlay_drops_affinity_and_matches_workers() -> None:
    docs = _by_name(render(K8S / "overlays" / "single-node"))
    assert all("affinity" not in d["spec"].get("template", {}).get("spec", {}) for d in docs.values()
               if d["kind"] in ("Deployment", "StatefulSet"))
    assert docs[("Deployment", "worker")]["spec"]["replicas"] == _workers_option(
        docs[("Job", "coordinator")]) == 2


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl absent: Python rendering only")
@pytest.mark.parametrize("directory", [K8S / "base", *OVERLAYS], ids=lambda p: p.name)
def test_python_rendering_agrees_with_kubectl(directory: Path) -> None:
    done = subprocess.run(["kubectl", "kustomize", str(directory)], capture_output=True, text=True,
                          timeout=60, check=True)
    theirs = [d for d in yaml.safe_load_all(done.stdout) if d]
    key = lambda d: (d["kind"], d["metadata"]["name"])  # noqa: E731
    assert sorted(theirs, key=key) == sorted(render(directory), key=key)


# --- every command, option, module and variable used exists in the code ---------------------

def _containers() -> Iterator[tuple[str, dict[str, Any]]]:
    docs = render(K8S / "base") + load_docs(K8S / "tools" / "runs-reader.yaml")
    for doc in docs:
        spec = doc.get("spec", {})
        pod = spec.get("template", {}).get("spec", spec)
        for container in pod.get("containers", []):
            yield f"{doc['kind']}/{doc['metadata']['name']}", container
    compose = yaml.safe_load(COMPOSE.read_text())
    for name, service in compose["services"].items():
        yield f"compose/{name}", {"command": service.get("command", []),
                                  "env": service.get("environment") or {}}


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
    else:
        assert program in EXTERNAL, f"unknown program {program}"


def _env_names(container: dict[str, Any]) -> set[str]:
    names = {e["name"] for e in container.get("env", []) if isinstance(e, dict)}
    names |= set(container["env"]) if isinstance(container.get("env"), dict) else set()
    config = load_docs(K8S / "base" / "config.yaml")
    for ref in container.get("envFrom", []):
        source = ref.get("configMapRef") or ref.get("secretRef")
        doc = next(d for d in config if d["metadata"]["name"] == source["name"])
        names |= set(doc.get("data", {})) | set(doc.get("stringData", {}))
    return names


def test_commands_options_modules_and_variables_exist() -> None:
    checked = 0
    for where, container in _containers():
        for argv in _argvs(container):
            try:
                check_argv(argv)
            except (KeyError, ValueError, ImportError) as exc:
                pytest.fail(f"{where}: {argv}: {exc!r}")
            checked += 1
        env = _env_names(container)
        stampede = {n for n in env if n.startswith("STAMPEDE_")} - {METRICS_PORT_ENV, METRICS_ADDR_ENV}
        assert stampede <= set(ENV.values()), f"{where}: unknown {stampede - set(ENV.values())}"
        uses_ours = any(a[0] in ("celery", "coordinator") for a in _argvs(container))
        if uses_ours and where != "Pod/runs-reader":
            assert stampede == set(ENV.values()), f"{where} lacks {set(ENV.values()) - stampede}"
    assert checked >= 10


def test_dockerfile_runs_our_worker_on_python_311_slim() -> None:
    text = (ROOT / "Dockerfile").read_text()
    assert "FROM python:3.11-slim" in text
    cmd = yaml.safe_load(text.split("CMD", 1)[1].replace("\\\n", ""))
    check_argv(cmd)
    assert "USER 10001" in text
    with pytest.raises(KeyError):
        check_argv(["coordinator", "no-such-command"])
    with pytest.raises(AssertionError):
        check_argv(["coordinator", "launch", "--no-such-option"])


def test_dockerfile_copies_every_package_the_runtime_imports() -> None:
    text = (ROOT / "Dockerfile").read_text()
    for package in ("coordinator", "model", "worker", "strategies", "results"):
        assert f"COPY {package} ./{package}" in text, f"the image lacks {package}/"
