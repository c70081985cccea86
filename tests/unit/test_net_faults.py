"""net: fault specs, and the launch refusing them (exit 2, one line) where no lab link control is."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from coordinator import faults
from coordinator.faults.net import LinkControl, NetControlError
from coordinator.faults.spec import Action, Fault, FaultError, Target
from tests.helpers import assert_bad_input, run_cli

REMOTE = ["--cache-url", "redis://c/0", "--lock-url", "redis://l/0", "--broker-url", "redis://b/0",
          "--origin-dsn", "postgresql://db/x"]


@pytest.mark.parametrize(("spec", "expected"), [
    ("net:partition:w1-cache@2+1.5", Fault(Target.NET, Action.PARTITION, 2.0, 1.5, "w1-cache")),
    ("net:partition:w1-cache@2", Fault(Target.NET, Action.PARTITION, 2.0, None, "w1-cache")),
    ("net:delay:w1-cache=0.5", Fault(Target.NET, Action.DELAY, 0.0, None, "w1-cache", 0.5)),
    ("net:delay:w1-cache=0", Fault(Target.NET, Action.DELAY, 0.0, None, "w1-cache", 0.0)),
    ("net:loss:w2-lock-store=5", Fault(Target.NET, Action.LOSS, 0.0, None, "w2-lock-store", 5.0)),
])
def test_parse_accepts(spec: str, expected: Fault) -> None:
    fault = faults.parse(spec)
    assert fault == expected
    assert fault.label == spec and faults.parse(fault.label) == fault


@pytest.mark.parametrize(("spec", "says"), [
    ("net:delay:w1=1", "net:partition:A-B@SECONDS"),
    ("net:cut:a-b@1", "allowed: partition, delay, loss"),
    ("net:partition:a-b=3", "takes @SECONDS[+DURATION], no =VALUE"),
    ("net:partition:a-b@1+0", "DURATION must be > 0"),
    ("net:partition:a-b@x", "'x' is not a number"),
    ("net:delay:a-b", "takes =MS"),
    ("net:delay:a-b=1@2", "no @SECONDS"),
    ("net:delay:a-b=inf", "finite number"),
    ("net:delay:a-b=20000", "[0, 10000]"),
    ("net:loss:a-b=0", "(0, 100]"),
])
def test_parse_rejects(spec: str, says: str) -> None:
    with pytest.raises(FaultError) as info:
        faults.parse(spec)
    assert says in str(info.value)


def test_partition_instant_checked_against_trial() -> None:
    assert faults.parse("net:partition:a-b@1+20").end_s(10) == 10
    with pytest.raises(FaultError, match="not inside the trial"):
        faults.check([faults.parse("net:partition:a-b@10")], 10.0)


@pytest.mark.parametrize(("argv", "says"), [
    (["--fault", "net:delay:w1-cache=1", *REMOTE], "and its link control (--net-control"),
    (["--fault", "net:delay:w1-cache=1", "--net-control", "127.0.0.1:9"], "need its services"),
    (["--fault", "cache:kill@1", "--net-control", "127.0.0.1:9", *REMOTE], "not allowed with remote"),
])
def test_launch_refuses_net_faults_without_the_lab(argv: list[str], says: str,
                                                   capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STAMPEDE_NET_CONTROL", raising=False)
    code, err = run_cli(["launch", "--seconds", "3", *argv], capsys)
    assert_bad_input(code, err, says)


@pytest.fixture
def fake_control() -> Iterator[tuple[LinkControl, list[str]]]:
    """A control endpoint on loopback that knows ``w1-lock-store`` and records each request."""
    seen: list[str] = []
    server = socket.create_server(("127.0.0.1", 0))

    def answer() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                line = conn.makefile("rb").readline().decode().strip()
                seen.append(line)
                conn.sendall(b"ok w1-lock-store\n" if line == "links" else
                             b"error no such link\n" if "w9" in line else b"ok done\n")

    threading.Thread(target=answer, daemon=True).start()
    yield LinkControl("127.0.0.1", server.getsockname()[1]), seen
    server.close()


def test_link_control_protocol(fake_control: tuple[LinkControl, list[str]]) -> None:
    control, seen = fake_control
    reverse = faults.parse("net:partition:lock-store-w1@1+1")
    assert control.unknown((reverse, faults.parse("net:delay:w9-cache=1"))) == ["w9-cache"]
    detail, lift = control.apply(reverse)
    lift()
    control.apply(faults.parse("net:delay:w1-lock-store=0.5"))
    assert detail == "done"
    assert seen[-3:] == ["partition lock-store-w1 on", "partition lock-store-w1 off",
                         "delay w1-lock-store 0.5"]
    with pytest.raises(NetControlError, match="no such link"):
        control.ask("delay", "w9-cache", "1")
    with pytest.raises(ValueError, match="HOST:PORT"):
        LinkControl.parse("nowhere")
