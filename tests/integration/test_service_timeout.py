"""Remote services that never come up, or refuse for good: ``--service-timeout`` bounds the wait.

Ports nothing listens on and a name that does not resolve are "not up yet": the coordinator
says so (which service, the error with credentials masked, elapsed) until the timeout, then
names the first one on one line and exits 2. A wrong password is not worth waiting for.
The run that proceeds once late services come up is tests/e2e/test_late_services.py.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from coordinator.stack.processes import free_port
from coordinator.stack.redis_server import start_redis
from tests.helpers import coordinator

SECRET_PW = "n0t-th1s/@one"


def _lines(stderr: str) -> tuple[list[str], str]:
    lines = stderr.strip().splitlines()
    return lines[:-1], lines[-1]


def test_services_never_up_timeout_gives_one_line_and_exit_2(tmp_path: Path) -> None:
    dead = free_port()
    urls = ["--cache-url", f"redis://:{SECRET_PW.replace('/', '%2F').replace('@', '%40')}"
            f"@127.0.0.1:{dead}/0",
            "--lock-url", "redis://stampede-no-such-host.invalid:6379/0",
            "--broker-url", f"redis://127.0.0.1:{dead}/2",
            "--origin-dsn", f"postgresql://stampede:pw-origin@127.0.0.1:{dead}/stampede"]
    t0 = time.monotonic()
    done = coordinator("launch", "--out", str(tmp_path / "run"), "--service-timeout", "3", *urls,
                       timeout=60)
    took = time.monotonic() - t0
    progress, last = _lines(done.stderr)
    assert done.returncode == 2, done.stderr
    assert 3 <= took < 20, took
    assert last.startswith("coordinator launch: error: ") and "--cache-url" in last, last
    assert "unreachable" in last and "Connection refused" in last and "--service-timeout 3" in last
    assert "Traceback" not in done.stderr
    # progress: every service not up, its error, the elapsed time; a name that does not resolve
    # counts as not up yet, like a refused port
    assert all(line.startswith("waiting for --") for line in progress), progress
    for option in ("--cache-url", "--lock-url", "--broker-url", "--origin-dsn"):
        assert any(line.startswith(f"waiting for {option} ") for line in progress), option
    assert any("--lock-url" in line and "Name or service not known" in line for line in progress)
    assert any(" s of 3 s)" in line for line in progress)
    for secret in ("n0t-th1s", "pw-origin"):  # masked in every line
        assert secret not in done.stderr
    assert not (tmp_path / "run").exists()  # nothing started, nothing written


@pytest.fixture
def locked_redis(tmp_path: Path) -> Iterator[str]:
    """A real Redis that requires a password; its URL with the right one."""
    proc, url = start_redis("pw-redis", tmp_path, password="right-pw")
    try:
        yield url
    finally:
        proc.stop()


def test_wrong_password_fails_at_once(locked_redis: str, tmp_path: Path) -> None:
    wrong = locked_redis.replace(":right-pw@", ":wrong-pw@")
    good = locked_redis.rsplit("/", 1)[0]
    t0 = time.monotonic()
    done = coordinator("launch", "--out", str(tmp_path / "run"), "--service-timeout", "60",
                       "--cache-url", wrong, "--lock-url", f"{good}/1", "--broker-url", f"{good}/2",
                       "--origin-dsn", f"postgresql://stampede@127.0.0.1:{free_port()}/stampede",
                       timeout=60)
    assert done.returncode == 2, done.stderr
    assert time.monotonic() - t0 < 15  # not the 60 s a service that is not up yet would get
    progress, last = _lines(done.stderr)
    assert progress == [] and "--cache-url" in last and "unreachable" in last, done.stderr
    assert "wrong-pw" not in done.stderr and "right-pw" not in done.stderr
