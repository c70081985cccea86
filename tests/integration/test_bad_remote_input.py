"""Bad remote-service options against real servers (the test fixtures): exit code 2, one line.

An unreachable service is a port nothing listens on, and it must be named within 10 seconds
(``--service-timeout 0``: asked once; waiting for services is tested in test_service_wait.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from coordinator.stack.processes import free_port
from tests.helpers import assert_bad_input, run_cli


@pytest.fixture
def remote(redis_server: Callable[[str], str], postgres_dsn: str) -> dict[str, str]:
    return {"--cache-url": redis_server("cache"), "--lock-url": redis_server("lock-store"),
            "--broker-url": redis_server("broker"), "--origin-dsn": postgres_dsn}


@pytest.mark.parametrize("option", ["--cache-url", "--lock-url", "--broker-url", "--origin-dsn"])
def test_unreachable_service_is_named(option: str, remote: dict[str, str], tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    dead = free_port()
    scheme = "postgresql://postgres@" if option == "--origin-dsn" else "redis://:pw@"
    urls = {**remote, option: f"{scheme}127.0.0.1:{dead}/0"}
    argv = ["launch", "--out", str(tmp_path / "run"), "--service-timeout", "0"]  # ask once
    for flag, url in urls.items():
        argv += [flag, url]
    t0 = time.monotonic()
    code, err = run_cli(argv, capsys)
    assert time.monotonic() - t0 < 10
    assert_bad_input(code, err, option)
    assert "unreachable" in err and str(dead) in err
    assert ":pw@" not in err  # a password in the URL is masked in the message
    assert not (tmp_path / "run").exists()  # nothing started, nothing written


def test_fault_with_remote_services(remote: dict[str, str], tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["launch", "--out", str(tmp_path / "run"), "--fault", "lock-store:kill@1"]
    for flag, url in remote.items():
        argv += [flag, url]
    code, err = run_cli(argv, capsys)
    assert_bad_input(code, err, "--fault")
    assert "remote services" in err
