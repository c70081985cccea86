"""The project's docker-compose.yml driven as a user drives it, with whichever Compose is installed.

``docker compose`` (v2) when the client has it, else ``docker-compose`` (v1.29): the same file, a
unique project name (``-p``) and an env file (``--env-file``) that selects the images and holds
the password. v1 has no ``up --wait``, so health is polled from ``docker inspect``. The host never
talks to a container's address: results come back with ``docker cp``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tests.containers.engine import ROOT, docker, docker_cli

COMPOSE_FILE = ROOT / "docker-compose.yml"
LABEL = "com.docker.compose.project"
# Variables of the user's environment that would override the env file (shell wins in Compose).
OURS = ("POSTGRES_USER", "POSTGRES_PASSWORD", "POSTGRES_DB", "REDIS_IMAGE", "POSTGRES_IMAGE",
        "MEMCACHED_IMAGE", "STAMPEDE_IMAGE", "STAMPEDE_BASE", "STAMPEDE_MEMCACHE_URL",
        "COMPOSE_PROJECT_NAME", "COMPOSE_FILE", "COMPOSE_PROFILES")


def compose_argv() -> list[str]:
    """``docker compose`` when the v2 plugin answers, else Debian's ``docker-compose`` (v1)."""
    for client in dict.fromkeys((docker_cli(), shutil.which("docker"))):
        if client and subprocess.run([client, "compose", "version"], capture_output=True,
                                     timeout=30, check=False).returncode == 0:
            return [client, "compose"]
    v1 = shutil.which("docker-compose")
    if v1 is None:
        raise RuntimeError("neither `docker compose` (v2) nor `docker-compose` (v1) is installed")
    return [v1]


@dataclass
class Compose:
    """One compose project: ``compose("up", "-d")`` runs ``<compose> -p P --env-file E -f F up -d``;
    ``overrides``: more ``-f`` files after the project's, as a user adds a docker-compose.override.yml."""

    project: str
    env_file: Path
    overrides: tuple[Path, ...] = ()
    argv0: list[str] = field(default_factory=compose_argv)

    @property
    def v2(self) -> bool:
        return self.argv0[-1] == "compose"

    def argv(self, *args: str) -> list[str]:
        files = [arg for path in (COMPOSE_FILE, *self.overrides) for arg in ("-f", str(path))]
        return [*self.argv0, "-p", self.project, "--env-file", str(self.env_file), *files, *args]

    def env(self) -> dict[str, str]:
        return {k: v for k, v in os.environ.items() if k not in OURS}

    def __call__(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """Run a compose command; a non-zero exit raises with its output."""
        done = subprocess.run(self.argv(*args), cwd=ROOT, env=self.env(), capture_output=True,
                              text=True, timeout=timeout, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(self.argv(*args))}: rc {done.returncode}\n"
                               f"{(done.stdout + done.stderr)[-3000:]}")
        return done

    def popen(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(self.argv(*args), cwd=ROOT, env=self.env(), text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def containers(self, service: str | None = None) -> list[str]:
        """IDs of this project's containers (of one service), running or not, one-offs included."""
        filters = ["--filter", f"label={LABEL}={self.project}"]
        if service:
            filters += ["--filter", f"label=com.docker.compose.service={service}"]
        listed = docker("ps", "-a", "-q", "--no-trunc", *filters).stdout.split()
        return sorted(listed)

    def leftovers(self) -> dict[str, list[str]]:
        """Containers, volumes and networks still labelled with this project."""
        found = {"containers": self.containers()}
        for kind in ("volume", "network"):
            names = docker(kind, "ls", "-q", "--filter", f"label={LABEL}={self.project}").stdout.split()
            found[f"{kind}s"] = names
        return found

    def wait_healthy(self, timeout_s: float = 180) -> float:
        """Wait until every container of the project that has a healthcheck is healthy (v1 has
        no ``up --wait``); return the seconds waited. Raise with each one's state and last probe."""
        started = time.monotonic()
        while True:
            states = inspect(self.containers())
            pending = {s["Name"]: health(s) for s in states if health(s) != "healthy"}
            if not pending:
                return time.monotonic() - started
            if time.monotonic() - started > timeout_s or any(h in ("unhealthy", "exited")
                                                            for h in pending.values()):
                raise AssertionError(f"not healthy after {time.monotonic() - started:.0f} s: "
                                     f"{_describe(states, pending)}")
            time.sleep(0.5)


def inspect(ids: list[str]) -> list[dict[str, Any]]:
    if not ids:
        return []
    states: list[dict[str, Any]] = json.loads(docker("inspect", *ids).stdout)
    return states


def health(state: Mapping[str, Any]) -> str:
    """healthy / starting / unhealthy, or the container's status when it has no healthcheck."""
    if state["State"]["Status"] != "running":
        return str(state["State"]["Status"])
    found = state["State"].get("Health")
    return str(found["Status"]) if found else "healthy"


def _describe(states: list[dict[str, Any]], pending: Mapping[str, str]) -> str:
    lines = []
    for state in states:
        if state["Name"] in pending:
            log = (state["State"].get("Health") or {}).get("Log") or [{}]
            lines.append(f"{state['Name']}={pending[state['Name']]} last probe: "
                         f"{str(log[-1].get('Output', '')).strip()[:200]}")
    return "; ".join(lines)


@dataclass
class HealthWatch:
    """Every healthcheck probe of some containers that starts while it runs (docker keeps only the
    last five, so they are polled each second): which ones failed, the statuses seen, how long the
    slowest took."""

    ids: list[str]
    probes: dict[tuple[str, str], tuple[int, str]] = field(default_factory=dict)
    statuses: set[str] = field(default_factory=set)
    slowest_s: float = 0.0
    _before: set[tuple[str, str]] = field(default_factory=set)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> HealthWatch:
        self._record()  # the probes already logged (start-up) are not this watch's
        self._before, self.probes, self.statuses = set(self.probes), {}, set()
        self._thread = threading.Thread(target=self._poll, name="health-watch", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        assert self._thread is not None
        self._thread.join(30)
        self._record()

    def _poll(self) -> None:
        while not self._stop.wait(1.0):
            self._record()

    def _record(self) -> None:
        for state in inspect(self.ids):
            self.statuses.add(health(state))
            for probe in (state["State"].get("Health") or {}).get("Log") or []:
                key = (state["Id"], probe["Start"])
                if key in self._before or key in self.probes:
                    continue
                self.probes[key] = (int(probe["ExitCode"]), str(probe["Output"]).strip())
                self.slowest_s = max(self.slowest_s, _seconds(probe["End"]) - _seconds(probe["Start"]))

    def failures(self) -> list[str]:
        return [f"{cid[:12]} at {start}: rc {rc} {out[:160]}"
                for (cid, start), (rc, out) in sorted(self.probes.items()) if rc != 0]


def _seconds(stamp: str) -> float:
    """Docker's RFC 3339 time with nanoseconds (``...T16:13:37.01183588Z``) as epoch seconds."""
    whole, _, frac = stamp.rstrip("Z").partition(".")
    fraction = float(f"0.{frac.split('+')[0] or 0}")
    return datetime.fromisoformat(whole).replace(tzinfo=UTC).timestamp() + fraction


def copy_out(container: str, path: str, dest: Path) -> Path:
    """``docker cp CONTAINER:PATH DEST`` (works on a stopped container); return the local copy."""
    docker("cp", f"{container}:{path}", str(dest), timeout=120)
    return dest


__all__ = ["Compose", "HealthWatch", "copy_out", "health", "inspect"]
