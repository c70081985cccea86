"""Every bad value of every option: exit code 2 and one line naming the option and what is allowed.

Remote-service cases run against real servers (the test fixtures); an unreachable one is a port
nothing listens on, and it must be named within 10 seconds.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from coordinator.cli import main
from coordinator.stack.processes import free_port

pytestmark = pytest.mark.integration

# (argv after ``launch``, text the one line must hold)
LAUNCH_CASES = [
    (["--workers", "0"], "--workers"), (["--workers", "-3"], "--workers"),
    (["--workers", "many"], "'many' is not a valid integer"),
    (["--clients", "0"], "--clients"), (["--repeat", "0"], "--repeat"),
    (["--seconds", "0"], "--seconds"), (["--seconds", "-1"], "--seconds"),
    (["--seconds", "ten"], "'ten' is not a valid float"),
    (["--ttl", "0"], "--ttl"), (["--ttl", "x"], "--ttl"),
    (["--scale", "0"], "--scale"), (["--pool-size", "0"], "--pool-size"),
    (["--origin-ms", "-1"], "--origin-ms"),
    (["--strategies", "bogus"], "--strategies"),
    (["--strategies", "lock:nope=1"], "nope"),
    (["--strategies", "lock:poll_ms=0"], "poll_ms"),
    (["--strategies", ""], "no strategy given"),
    (["--clients", "2", "--workers", "3"], "--clients 2 is fewer than --workers 3"),
    (["--cache-url", "http://x"], "--cache-url"),
    (["--origin-dsn", "redis://x"], "--origin-dsn"),
    (["--broker-url", "redis://127.0.0.1:99999/0"], "--broker-url"),
    (["--cache-url", "redis://127.0.0.1:1/0"], "missing --lock-url"),
    (["--fault", "nonsense"], "TARGET:ACTION@SECONDS"),
    (["--fault", "db:kill@1"], "allowed: lock-store, cache, origin, worker, broker"),
    (["--fault", "cache:melt@1"], "allowed: kill, pause"),
    (["--fault", "cache:kill@-2"], ">= 0"),
    (["--fault", "cache:kill@30", "--seconds", "5"], "not inside the trial"),
    (["--fault", "broker:restart@1", "--seconds", "5"], "between trials"),
    (["--fault", "worker:kill@1+2"], "takes no +DURATION"),
]


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    err = capsys.readouterr().err
    return int(exit_info.value.code or 0), err


def assert_bad_input(code: int, err: str, says: str) -> None:
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1, err
    assert says in err, err
    assert "Traceback" not in err


@pytest.mark.parametrize(("args", "says"), LAUNCH_CASES)
def test_launch_bad_values(args: list[str], says: str, capsys: pytest.CaptureFixture[str],
                           tmp_path: Path) -> None:
    code, err = run_cli(["launch", "--out", str(tmp_path / "run"), *args], capsys)
    assert_bad_input(code, err, says)


def test_out_holds_a_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "run.json").write_text("{}")
    code, err = run_cli(["launch", "--out", str(tmp_path)], capsys)
    assert_bad_input(code, err, "--out")
    assert (tmp_path / "run.json").read_text() == "{}"  # never overwritten


def test_out_not_writable(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    code, err = run_cli(["launch", "--out", str(blocker / "run")], capsys)
    assert_bad_input(code, err, "--out")


def test_report_without_a_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run_cli(["report", str(tmp_path)], capsys)
    assert_bad_input(code, err, "RUN_DIR")


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
    argv = ["launch", "--out", str(tmp_path / "run")]
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
