"""The Docker engine and the images the container tests run (the compose suite and the k8s-shaped run).

``docker_engine()`` makes sure a daemon answers: it reuses a running one, or starts ``dockerd``
itself (root, no service manager here) and stops it by PID afterwards only when it started it
and no other test session still uses it. ``ensure_images()`` makes or reuses the local Debian
base, builds the project image with the same scripts ``make image`` runs, and stand-ins for the
public Redis, PostgreSQL, memcached, nginx and Varnish images when those are not on the machine and cannot be
pulled.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
IMAGES_DIR = Path(__file__).resolve().parent / "images"
# Another tag here makes a fresh base (and so rebuilds everything): how the fresh-base time is measured.
LOCAL_BASE = os.environ.get("STAMPEDE_TEST_LOCAL_BASE", "local/debian:bookworm")
PUBLIC = {"redis": "redis:7.2", "postgres": "postgres:15", "memcached": "memcached:1.6",
          "nginx": "nginx:1.22", "varnish": "varnish:7.1"}
STAND_INS = {"redis": "stampede-test/redis:7-bookworm", "postgres": "stampede-test/postgres:15-bookworm",
             "memcached": "stampede-test/memcached:1.6-bookworm",
             "nginx": "stampede-test/nginx:1.22-bookworm", "varnish": "stampede-test/varnish:7.1-bookworm"}
PROJECT_IMAGE = os.environ.get("STAMPEDE_IMAGE", "stampede-lab:latest")
LOCK_DIR = Path(tempfile.gettempdir())
START_TIMEOUT_S = 30.0
PULL_TIMEOUT_S = 20.0


class EngineUnavailable(RuntimeError):
    """The Docker engine is not running and cannot be started here (the one-line skip reason)."""


@dataclass(frozen=True)
class Images:
    """Image references for the container tests: the project image and the service images."""

    project: str
    redis: str
    postgres: str
    memcached: str
    nginx: str
    varnish: str

    def public(self) -> dict[str, str]:
        """Each public image the manifests name -> the image to run for it (itself or a stand-in)."""
        return {PUBLIC["redis"]: self.redis, PUBLIC["postgres"]: self.postgres,
                PUBLIC["memcached"]: self.memcached, PUBLIC["nginx"]: self.nginx,
                PUBLIC["varnish"]: self.varnish, "stampede-lab:latest": self.project}


def docker_cli() -> str:
    """Debian's client when present: the newer /usr/local/bin/docker lacks buildx for builds."""
    for candidate in ("/usr/bin/docker", shutil.which("docker")):
        if candidate and Path(candidate).exists():
            return candidate
    raise EngineUnavailable("no docker client installed (apt-get install docker.io)")


def docker(*args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run ``docker ARGS`` (BuildKit builds); a failure with ``check`` raises with its stderr."""
    done = subprocess.run([docker_cli(), *args], capture_output=True, text=True, timeout=timeout,
                          check=False, env={**os.environ, "DOCKER_BUILDKIT": "1"})
    if check and done.returncode != 0:
        raise RuntimeError(f"docker {' '.join(args)}: rc {done.returncode}: {done.stderr.strip()[-2000:]}")
    return done


def engine_answers() -> bool:
    """Whether a daemon answers on the default socket."""
    try:
        return docker("info", "--format", "{{.ServerVersion}}", timeout=15, check=False).returncode == 0
    except EngineUnavailable:
        return False


def _start_dockerd(log: Path) -> subprocess.Popen[bytes]:
    """``dockerd >LOG 2>&1 &`` and wait until it answers; raise EngineUnavailable with why not."""
    dockerd = shutil.which("dockerd")
    if dockerd is None:
        raise EngineUnavailable("dockerd is not installed (apt-get install docker.io)")
    if os.geteuid() != 0:
        raise EngineUnavailable("the Docker engine is not running and starting dockerd needs root")
    with log.open("ab") as out:
        proc = subprocess.Popen([dockerd], stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if engine_answers():
            return proc
        if proc.poll() is not None:
            tail = log.read_text(errors="replace").strip().splitlines()[-1:]
            raise EngineUnavailable(f"dockerd exited with {proc.returncode}: {' '.join(tail)}")
        time.sleep(0.3)
    _stop(proc)
    raise EngineUnavailable(f"dockerd did not answer within {START_TIMEOUT_S:.0f} s (log {log})")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the daemon we started (by its PID), SIGKILL if it does not exit in 30 s."""
    if proc.poll() is not None:
        return
    os.kill(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


@contextlib.contextmanager
def docker_engine() -> Iterator[None]:
    """A Docker daemon that answers for the duration of the block.

    Sessions in parallel (helpers, CI jobs) share one daemon: each holds a shared lock on a users
    file while inside; the session that started dockerd stops it at the end only if it can then
    take that lock exclusively (nobody else inside), else it leaves it running and says so.
    """
    with (LOCK_DIR / "stampede-dockerd.start.lock").open("w") as start_lock, \
            (LOCK_DIR / "stampede-dockerd.users.lock").open("w") as users:
        fcntl.flock(start_lock, fcntl.LOCK_EX)
        try:
            started = None
            if not engine_answers():
                started = _start_dockerd(LOCK_DIR / "stampede-dockerd.log")
            fcntl.flock(users, fcntl.LOCK_SH)
        finally:
            fcntl.flock(start_lock, fcntl.LOCK_UN)
        try:
            yield
        finally:
            if started is not None:
                _stop_if_alone(started, users)


def _stop_if_alone(proc: subprocess.Popen[bytes], users: object) -> None:
    """Stop the daemon we started unless another session still holds the users lock."""
    fcntl.flock(users, fcntl.LOCK_UN)  # type: ignore[arg-type]
    try:
        fcntl.flock(users, fcntl.LOCK_EX | fcntl.LOCK_NB)  # type: ignore[arg-type]
    except BlockingIOError:
        print(f"dockerd (pid {proc.pid}) left running: another test session still uses it")
        return
    _stop(proc)


def image_exists(ref: str) -> bool:
    return docker("image", "inspect", ref, timeout=30, check=False).returncode == 0


def _pullable(ref: str) -> bool:
    """Whether the public image is here or can be pulled (no registry here: fails in seconds)."""
    if image_exists(ref):
        return True
    if os.environ.get("STAMPEDE_TEST_PULL", "1") == "0":
        return False
    try:
        return docker("pull", "-q", ref, timeout=PULL_TIMEOUT_S, check=False).returncode == 0
    except subprocess.TimeoutExpired:
        return False


def ensure_base() -> str:
    """The base of the project image: the public one when present, else the local Debian base."""
    if os.environ.get("STAMPEDE_TEST_BASE"):
        return os.environ["STAMPEDE_TEST_BASE"]
    if image_exists("python:3.11-slim"):
        return "python:3.11-slim"
    return _local_base()


def _run(argv: list[str], timeout: float) -> None:
    """Run a build step from the repository root; a failure raises with the output's tail."""
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: rc {done.returncode}: {(done.stdout + done.stderr)[-3000:]}")


def _image_id(ref: str) -> str | None:
    done = docker("image", "inspect", "--format", "{{.Id}}", ref, timeout=30, check=False)
    return done.stdout.strip() if done.returncode == 0 else None


@contextlib.contextmanager
def _replacing(tag: str) -> Iterator[None]:
    """Remove the image ``tag`` pointed at before a rebuild moved it, so each source change does not
    leave a dangling 470 MB image behind. Not removed (docker says why, kept in its result) when a
    container or another tag still uses it: that is its owner's to remove."""
    before = _image_id(tag)
    yield
    if before is not None and before != _image_id(tag):
        docker("rmi", before, timeout=60, check=False)


def build_project(base: str) -> str:
    """The project image, as ``make image BASE=...`` builds it (host-built wheels, offline pip)."""
    with _replacing(PROJECT_IMAGE):
        _run(["make", "--no-print-directory", "image", f"BASE={base}", f"IMAGE={PROJECT_IMAGE}"],
             timeout=900)
    return PROJECT_IMAGE


def build_stand_in(kind: str, base: str) -> str:
    """A stand-in for the public ``kind`` image, built from Debian packages on the local base."""
    tag = STAND_INS[kind]
    with _replacing(tag):
        docker("build", "-q", "--build-arg", f"BASE={base}", "-t", tag, str(IMAGES_DIR / kind), timeout=900)
    return tag


_IMAGES: list[Images] = []


def ensure_images() -> Images:
    """Every image the container tests need, built once per session (docker's cache across sessions).

    Call inside ``docker_engine()``. The base comes first; the builds then run side by side
    (mostly waiting on Debian's mirror, not on the 2 cores).
    """
    if _IMAGES:
        return _IMAGES[0]
    started = time.monotonic()
    missing = [kind for kind, public in PUBLIC.items() if not _pullable(public)]
    base = ensure_base()
    local = _local_base() if missing else base
    based = time.monotonic()
    with ThreadPoolExecutor(max_workers=1 + len(PUBLIC)) as pool:
        project = pool.submit(build_project, base)
        stand_ins = {kind: pool.submit(build_stand_in, kind, local) for kind in missing}
        services = {kind: stand_ins[kind].result() if kind in stand_ins else PUBLIC[kind]
                    for kind in PUBLIC}
        images = Images(project=project.result(), **services)
    print(f"images: base {base} in {based - started:.0f} s, builds in {time.monotonic() - based:.0f} s "
          f"({images})")
    _IMAGES.append(images)
    return images


def _local_base() -> str:
    """The Debian base made from Debian's packages (``make base-image``), made once and kept."""
    if not image_exists(LOCAL_BASE):
        _run(["sh", str(ROOT / "scripts" / "debian-base.sh"), LOCAL_BASE], timeout=600)
    return LOCAL_BASE
