"""The compose stack of the container suite: up with N workers, the coordinator service's runs, down.

``compose_stack`` writes the env file a user would (images, password, healthcheck timings), brings
the default services up with ``--scale worker=N`` and waits for them to be healthy; on the way out
it always runs ``down -v`` (the suite's last test runs it first and checks what is left).
``Launch`` runs ``<compose> run coordinator coordinator launch ...`` with its stderr lines stamped
as they arrive, so a test can act at an instant of a trial, then copies the run directory out of
the stopped one-off container (``docker cp``: the host never connects to a container address).
"""

from __future__ import annotations

import contextlib
import re
import subprocess
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from tests.containers.compose import Compose, copy_out
from tests.containers.engine import Images, docker
from tests.helpers import LineReader

START = re.compile(r"^trial 1/\d+ \S+ r1: sent to .* starts in ([\d.]+) s")


def env_file(path: Path, images: Images, password: str, extra: Mapping[str, str]) -> Path:
    """The stack's ``.env``: the images (stand-ins where the public ones are absent), the password."""
    lines = {"POSTGRES_PASSWORD": password, "REDIS_IMAGE": images.redis,
             "POSTGRES_IMAGE": images.postgres, "MEMCACHED_IMAGE": images.memcached,
             "NGINX_IMAGE": images.nginx, "VARNISH_IMAGE": images.varnish,
             "STAMPEDE_IMAGE": images.project, **extra}
    path.write_text("".join(f"{k}={v}\n" for k, v in lines.items()))
    return path


@contextlib.contextmanager
def compose_stack(project: str, env: Path, workers: int,
                  overrides: tuple[Path, ...] = ()) -> Iterator[tuple[Compose, float]]:
    """cache, locks, broker, origin and ``workers`` workers (and the services of the profiles the
    env file's COMPOSE_PROFILES selects), healthy; (compose, seconds to healthy)."""
    compose = Compose(project, env, overrides)
    started = time.monotonic()
    try:
        compose("up", "-d", *(["--wait"] if compose.v2 else []), "--scale", f"worker={workers}")
        up_s = time.monotonic() - started
        compose.wait_healthy()
        print(f"\ncompose up returned in {up_s:.1f} s; all healthy after {time.monotonic() - started:.1f} s")
        yield compose, time.monotonic() - started
    finally:
        for cid in compose.containers():  # one-off runs first, then the project
            docker("rm", "-f", cid, check=False)
        compose("down", "-v", "--remove-orphans", timeout=180)


@dataclass
class Launch:
    """``coordinator launch`` in the coordinator service, as a one-off container named ``name``."""

    compose: Compose
    name: str
    proc: subprocess.Popen[str]
    err: LineReader

    @classmethod
    def start(cls, compose: Compose, name: str, *args: str) -> Launch:
        proc = compose.popen("run", "-T", "--name", name, "coordinator", "coordinator", "launch", *args)
        return cls(compose, name, proc, LineReader(proc))

    def sleep_into_trial(self, seconds: float, timeout_s: float = 240) -> None:
        """Sleep until ``seconds`` after trial 1's start instant (from its "starts in" line)."""
        self.err.sleep_after(START, seconds, timeout_s, missing="trial 1 never started")

    def finish(self, out: str, dest: Path, timeout_s: float = 300) -> tuple[int, str]:
        """Wait for the run; copy ``out`` (in the container) to ``dest``; (exit code, stdout)."""
        assert self.proc.stdout is not None
        table = self.proc.stdout.read()
        code = self.proc.wait(timeout_s)
        self.err.join(10)
        try:
            copy_out(self.name, out, dest)
        except RuntimeError as exc:
            raise AssertionError(f"{self.name} exited {code} and left no run directory ({exc}); "
                                 f"its stderr:\n{self.stderr()[-3000:]}") from None
        finally:
            docker("rm", "-f", self.name, check=False)
        return code, table

    def stderr(self) -> str:
        return self.err.text()
