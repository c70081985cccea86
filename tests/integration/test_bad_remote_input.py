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


def test_an_unreachable_app_tier_is_named_after_the_service_timeout(
        remote: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dead = free_port()
    argv = ["launch", "--out", str(tmp_path / "run"), "--service-timeout", "1",
            "--app-servers", "2", "--app-url", f"http://127.0.0.1:{dead}"]
    for flag, url in remote.items():
        argv += [flag, url]
    t0 = time.monotonic()
    code, err = run_cli(argv, capsys)
    assert 1 <= time.monotonic() - t0 < 10  # waited for it, as for the other services
    assert_bad_input(code, err, "--app-url")
    assert f"127.0.0.1:{dead}" in err and "--service-timeout 1" in err
    assert not (tmp_path / "run").exists()


def _black_box(remote: dict[str, str], tmp_path: Path, url: str, *extra: str) -> list[str]:
    keys = tmp_path / "keys.txt"
    keys.write_text("7\n")
    argv = ["launch", "--out", str(tmp_path / "run"), "--service-url", url, "--keys-file",
            str(keys), *extra]
    for flag, value in remote.items():
        argv += [flag, value]
    return argv


def test_an_unreachable_black_box_is_named_after_the_service_timeout(
        remote: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dead = free_port()
    argv = _black_box(remote, tmp_path, f"http://127.0.0.1:{dead}/items/{{key}}",
                      "--service-timeout", "1", "--origin-statement", "SELECT 1")
    t0 = time.monotonic()
    code, err = run_cli(argv, capsys)
    assert 1 <= time.monotonic() - t0 < 10
    assert_bad_input(code, err, "--service-url")
    assert f"127.0.0.1:{dead}/items/7" in err and "waited 1 s" in err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(("extra", "says"), [
    (("--origin-statement", "SELECT nothing FROM nowhere_at_all WHERE id = $1"),
     "--origin-statement: pg_stat_statements knows no statement"),
    (("--origin-statement", "SELECT 1", "--service-cache-url", "redis://:pw@127.0.0.1:1/0"),
     "--service-cache-url"),
    (("--origin-counter-url", "http://127.0.0.1:1/metrics", "--origin-counter-name", "c"),
     "--origin-counter-url"),
])
def test_a_black_box_count_or_cache_that_cannot_be_read_is_named(
        remote: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str],
        http_service: str, extra: tuple[str, ...], says: str) -> None:
    argv = _black_box(remote, tmp_path, f"{http_service}/items/{{key}}", *extra)
    code, err = run_cli(argv, capsys)
    assert_bad_input(code, err, says)
    assert ":pw@" not in err
    assert not (tmp_path / "run").exists()
