"""The rendered k8s/ manifests started as Docker containers: a test of our manifests, no cluster.

Each pod of a Deployment, StatefulSet, Job or Pod becomes one container on one user-defined
network, made as the kubelet would make it from the manifest alone: its image (public images
mapped to local stand-ins when they cannot be pulled), command (replaces the ENTRYPOINT) and
args (replace the CMD), env and envFrom resolved from the rendered ConfigMaps and Secrets,
workingDir, user, group and fsGroup, read-only root, dropped capabilities, no privilege
escalation, CPU and memory limits, emptyDir / PVC / ConfigMap volumes, and the readiness probe
(exec) polled until it passes. Each Service name is a network alias of the pods its selector
matches, and its port must be the container port its targetPort names (an alias cannot remap).
What it cannot show: scheduling, node affinity and spreading, network policy, PVC provisioning.
Nothing is reached from the host but through the engine (``docker exec``, ``docker cp``).
"""

from __future__ import annotations

import base64
import io
import subprocess
import tarfile
import threading
import time
import uuid
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tests.containers.engine import docker, docker_cli

LABEL = "stampede-k8s-test"
WORKLOADS = ("Deployment", "StatefulSet", "Job", "Pod")


class ManifestError(RuntimeError):
    """The manifests ask for something a cluster would refuse or could not do."""


def pod_spec(doc: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = doc["spec"]
    return spec if doc["kind"] == "Pod" else spec["template"]["spec"]


def pod_labels(doc: dict[str, Any]) -> dict[str, str]:
    meta = doc["metadata"] if doc["kind"] == "Pod" else doc["spec"]["template"]["metadata"]
    return dict(meta.get("labels", {}))


def container_argv(container: dict[str, Any]) -> tuple[list[str], list[str]]:
    """k8s to docker: ``command`` replaces the ENTRYPOINT (and drops the CMD), ``args`` the CMD."""
    if "command" in container:
        command = container["command"]
        return ["--entrypoint", command[0]], [*command[1:], *container.get("args", [])]
    return [], list(container.get("args", []))


def security_flags(spec: dict[str, Any], container: dict[str, Any]) -> list[str]:
    """runAsUser/Group, fsGroup (a supplementary group), read-only root, capabilities, no-new-privs."""
    pod, own = spec.get("securityContext", {}), container.get("securityContext", {})
    ctx = {**pod, **own}
    flags = []
    if "runAsUser" in ctx:
        flags += ["--user", f"{ctx['runAsUser']}:{ctx.get('runAsGroup', ctx['runAsUser'])}"]
    if ctx.get("runAsNonRoot") and ctx.get("runAsUser", 1) == 0:
        raise ManifestError(f"{container['name']}: runAsNonRoot with runAsUser 0")
    if "fsGroup" in pod:
        flags += ["--group-add", str(pod["fsGroup"])]
    if own.get("readOnlyRootFilesystem"):
        flags.append("--read-only")
    if own.get("allowPrivilegeEscalation") is False:
        flags += ["--security-opt", "no-new-privileges"]
    flags += [f"--cap-drop={c}" for c in own.get("capabilities", {}).get("drop", [])]
    limits = container.get("resources", {}).get("limits", {})
    if "cpu" in limits:
        cpu = str(limits["cpu"])
        flags += ["--cpus", str(float(cpu[:-1]) / 1000 if cpu.endswith("m") else float(cpu))]
    if "memory" in limits:
        flags += ["--memory", str(limits["memory"]).replace("Gi", "g").replace("Mi", "m")]
    return flags


def check_postgres_uid_999(image: str) -> None:
    """The manifest runs the origin as uid 999 (``runAsUser: 999``), the ``postgres`` user of the
    official image and of the local stand-in (``tests/containers/images/postgres``); another fails."""
    found = docker("run", "--rm", "--network", "none", "--entrypoint", "id", image, "-u", "postgres",
                   check=False)
    if found.stdout.strip() != "999":
        raise ManifestError(f"{image}: its postgres user must be uid 999, as k8s/base/origin.yaml's "
                            f"runAsUser expects; `id -u postgres` gave "
                            f"{(found.stdout + found.stderr).strip()!r}")


class Cluster:
    """The objects of rendered manifests, their pods started as containers; all removed on exit."""

    def __init__(self, docs: list[dict[str, Any]], images: Mapping[str, str]) -> None:
        self.objects = {(d["kind"], d["metadata"]["name"]): d for d in docs}
        self.images = dict(images)
        self.run = uuid.uuid4().hex[:8]
        self.network = f"stampede-k8s-{self.run}"
        self.label = f"{LABEL}={self.run}"
        self.volumes: set[str] = set()
        self.started: dict[str, float] = {}  # container -> when it was started (monotonic)
        self._lock = threading.Lock()

    def __enter__(self) -> Cluster:
        docker("network", "create", "--label", self.label, self.network)
        return self

    def __exit__(self, *_: object) -> None:
        self.remove()

    # --- objects -----------------------------------------------------------------------------

    def data(self, kind: str, name: str) -> dict[str, str]:
        """A ConfigMap's or a Secret's keys and values (Secret ``data`` is base64)."""
        doc = self.objects.get((kind, name))
        if doc is None:
            raise ManifestError(f"{kind} {name} is referenced but not in the manifests")
        values = dict(doc.get("stringData", {})) | dict(doc.get("data", {}))
        if kind == "Secret":
            values |= {k: base64.b64decode(v).decode() for k, v in doc.get("data", {}).items()}
        return values

    def env(self, container: dict[str, Any]) -> dict[str, str]:
        """envFrom first, then env (later entries win), every reference resolved or an error."""
        env: dict[str, str] = {}
        for ref in container.get("envFrom", []):
            kind = "ConfigMap" if "configMapRef" in ref else "Secret"
            env |= self.data(kind, (ref.get("configMapRef") or ref["secretRef"])["name"])
        for item in container.get("env", []):
            source = item.get("valueFrom")
            if source is None:
                env[item["name"]] = str(item["value"])
                continue
            kind = "ConfigMap" if "configMapKeyRef" in source else "Secret"
            ref = source.get("configMapKeyRef") or source["secretKeyRef"]
            values = self.data(kind, ref["name"])
            if ref["key"] not in values:
                raise ManifestError(f"{container['name']}: {kind} {ref['name']} has no key {ref['key']}")
            env[item["name"]] = values[ref["key"]]
        return env

    def aliases(self, labels: dict[str, str], container: dict[str, Any]) -> list[str]:
        """The Services whose selector matches these labels; each port must be its target port."""
        names = []
        ports = {p.get("name"): p["containerPort"] for p in container.get("ports", [])}
        for (kind, name), svc in self.objects.items():
            selector = svc.get("spec", {}).get("selector", {}) if kind == "Service" else {}
            if not selector or any(labels.get(k) != v for k, v in selector.items()):
                continue
            for port in svc["spec"]["ports"]:
                target = port.get("targetPort", port["port"])
                number = ports.get(target) if isinstance(target, str) else target
                if number is None or number != port["port"]:
                    raise ManifestError(f"Service {name}: port {port['port']} -> targetPort {target!r}, "
                                        f"container {container['name']} has ports {ports}")
            names.append(name)
        return names

    # --- volumes -----------------------------------------------------------------------------

    def _volume(self, name: str, image: str, fs_group: int | None,
                files: Mapping[str, str] | None = None, mode: str = "2775") -> str:
        """A named volume (emptyDir, PVC, a ConfigMap's files) with the owner and mode kubelet gives
        it: group fsGroup (setgid), world-writable for an emptyDir. Docker's tmpfs would keep the
        image directory's mode instead (seen: /var/run/postgresql, 2775 root:root)."""
        volume = f"{self.network}-{name}"
        with self._lock:
            if volume in self.volumes:  # a PVC shared by two pods (the Job's and the runs reader's)
                return volume
            self.volumes.add(volume)
        docker("volume", "create", "--label", self.label, volume)
        script = f"chmod {mode} /v" + ("" if fs_group is None else f" && chgrp {fs_group} /v")
        archive = io.BytesIO()
        with tarfile.open(fileobj=archive, mode="w") as tar:
            for key, text in (files or {}).items():
                info = tarfile.TarInfo(key)
                info.size, info.mode = len(text.encode()), 0o644
                tar.addfile(info, io.BytesIO(text.encode()))
        script = f"tar -x -C /v && {script}"
        subprocess.run([docker_cli(), "run", "--rm", "-i", "--label", self.label, "--user", "0",
                        "--network", "none", "-v", f"{volume}:/v", "--entrypoint", "sh", image,
                        "-c", script], input=archive.getvalue(), capture_output=True, timeout=120,
                       check=True)
        return volume

    def volume_flags(self, doc: dict[str, Any], pod: str, container: dict[str, Any],
                     image: str) -> list[str]:
        spec = pod_spec(doc)
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        claims = {t["metadata"]["name"] for t in doc["spec"].get("volumeClaimTemplates", [])}
        fs_group = spec.get("securityContext", {}).get("fsGroup")
        flags = []
        for mount in container.get("volumeMounts", []):
            ro = ",readonly" if mount.get("readOnly") else ""
            source = volumes.get(mount["name"], {})
            if "emptyDir" in source:
                volume = self._volume(f"{mount['name']}-{pod}", image, fs_group, mode="2777")
            elif mount["name"] in claims:
                volume = self._volume(f"{mount['name']}-{pod}", image, fs_group)
            elif "persistentVolumeClaim" in source:
                volume = self._volume(source["persistentVolumeClaim"]["claimName"], image, fs_group)
            elif "configMap" in source:
                files = self.data("ConfigMap", source["configMap"]["name"])
                volume = self._volume(f"cm-{source['configMap']['name']}", image, None, files, "0755")
            else:
                raise ManifestError(f"{pod}: volume {mount['name']} is not defined (or not supported)")
            # volume-nocopy: an emptyDir or a new PVC starts empty (docker would copy the image's files)
            flags += ["--mount", f"type=volume,src={volume},dst={mount['mountPath']},volume-nocopy{ro}"]
        return flags

    # --- pods --------------------------------------------------------------------------------

    def start(self, kind: str, name: str, extra_args: tuple[str, ...] = ()) -> list[str]:
        """Every pod of one workload, detached; returns the container names (= pod names)."""
        doc = self.objects[(kind, name)]
        replicas = int(doc["spec"].get("replicas", 1)) if kind != "Pod" else 1
        spec = pod_spec(doc)
        if len(spec["containers"]) != 1:
            raise ManifestError(f"{kind} {name}: one container per pod is all this runner does")
        [container] = spec["containers"]
        restart = "no" if kind in ("Job", "Pod") else "always"  # a crashed pod's container restarts
        pods = [f"{name}-{i}" if kind == "StatefulSet" else f"{name}-{self.run[:5]}{i}"
                for i in range(replicas)]
        with ThreadPoolExecutor(4) as pool:  # replicas start together, as a ReplicaSet makes them
            return list(pool.map(lambda pod: self._run(doc, pod, container, restart, extra_args), pods))

    def _run(self, doc: dict[str, Any], pod: str, container: dict[str, Any], restart: str,
             extra_args: tuple[str, ...]) -> str:
        image = self.images.get(container["image"], container["image"])
        entrypoint, args = container_argv(container)
        env = self.env(container)
        flags = ["--name", f"{self.network}-{pod}", "--hostname", pod, "--label", self.label,
                 "--network", self.network, "--restart", restart,
                 *security_flags(pod_spec(doc), container),
                 *self.volume_flags(doc, pod, container, image), *entrypoint]
        for alias in self.aliases(pod_labels(doc), container):
            flags += ["--network-alias", alias]
        if "workingDir" in container:
            flags += ["-w", container["workingDir"]]
        for key, value in env.items():
            flags += ["-e", f"{key}={value}"]
        docker("run", "-d", *flags, image, *args, *extra_args)
        self.started[f"{self.network}-{pod}"] = time.monotonic()
        return f"{self.network}-{pod}"

    def wait_ready(self, kind: str, name: str, container_name: str, timeout_s: float) -> float:
        """Run the workload's readiness probe (exec) in one of its containers until it passes, at
        most every second (not every periodSeconds: the test waits less); seconds from its start."""
        [container] = pod_spec(self.objects[(kind, name)])["containers"]
        probe = container.get("readinessProbe")
        if probe is None:
            return 0.0
        deadline = time.monotonic() + timeout_s
        while True:
            done = self.probe(kind, name, container_name)
            if done.returncode == 0:
                return time.monotonic() - self.started[container_name]
            if time.monotonic() > deadline:
                raise ManifestError(f"{container_name} not ready after {timeout_s:g} s: "
                                    f"{(done.stdout + done.stderr).strip()[-300:]}")
            time.sleep(min(1.0, float(probe.get("periodSeconds", 10))))

    def probe(self, kind: str, name: str, container_name: str) -> subprocess.CompletedProcess[str]:
        """The workload's readiness probe command, once, in the container (as the kubelet runs it)."""
        [container] = pod_spec(self.objects[(kind, name)])["containers"]
        probe = container["readinessProbe"]
        timeout_s = float(probe.get("timeoutSeconds", 1)) + 10  # + docker exec's own start on 2 cores
        argv = ["exec", container_name, *probe["exec"]["command"]]
        try:
            return docker(*argv, check=False, timeout=timeout_s)
        except subprocess.TimeoutExpired:  # past its timeoutSeconds the kubelet counts a failure
            return subprocess.CompletedProcess(argv, 124, "", f"probe timed out after {timeout_s:g} s")

    def copy_out(self, container_name: str, path: str, dest: Path) -> None:
        """``docker cp CONTAINER:PATH`` as a tar stream, unpacked under ``dest`` (kubectl cp's way)."""
        done = subprocess.run([docker_cli(), "cp", f"{container_name}:{path}", "-"],
                              capture_output=True, timeout=300, check=True)
        with tarfile.open(fileobj=io.BytesIO(done.stdout)) as tar:
            tar.extractall(dest, filter="data")

    # --- clean-up ----------------------------------------------------------------------------

    def leftovers(self) -> list[str]:
        """Containers, volumes and networks of this run still present (none after ``remove``)."""
        found = []
        for what in (["ps", "-aq"], ["volume", "ls", "-q"], ["network", "ls", "-q"]):
            out = docker(*what, "--filter", f"label={self.label}").stdout.split()
            found += [f"{what[0]} {item}" for item in out]
        return found

    def remove(self) -> None:
        containers = docker("ps", "-aq", "--filter", f"label={self.label}").stdout.split()
        if containers:
            docker("rm", "-f", "-v", *containers, timeout=300)
        volumes = docker("volume", "ls", "-q", "--filter", f"label={self.label}").stdout.split()
        if volumes:
            docker("volume", "rm", *volumes)
        docker("network", "rm", self.network, check=False)
