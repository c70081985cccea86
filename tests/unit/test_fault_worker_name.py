"""``worker:kill:wN@S`` names the worker a fault kills; every other fault refuses a name."""

from __future__ import annotations

import pytest

from coordinator import faults
from coordinator.faults.spec import Action, Fault, FaultError, Target
from tests.helpers import assert_bad_input, run_cli


def test_a_named_worker_parses_and_round_trips() -> None:
    fault = faults.parse("worker:kill:w2@3")
    assert fault == Fault(Target.WORKER, Action.KILL, 3.0, worker="w2")
    assert fault.label == "worker:kill:w2@3" and faults.parse(fault.label) == fault
    assert faults.parse("worker:kill@3").worker is None  # unnamed: the last worker, as before
    faults.check([faults.parse("worker:kill:w8@1")], 5.0, workers=8)


@pytest.mark.parametrize(("spec", "says"), [
    ("worker:kill:x@1", "worker name 'x' is not w1, w2, ..."),
    ("worker:kill:w0@1", "worker name 'w0' is not w1, w2, ..."),
    ("worker:kill:@1", "worker name '' is not w1, w2, ..."),
    ("worker:kill:w2@x", "'x' is not a number"),
    ("cache:kill:w2@1", "only worker:kill takes a name"),
])
def test_bad_names_are_refused(spec: str, says: str) -> None:
    with pytest.raises(FaultError) as info:
        faults.parse(spec)
    assert says in str(info.value)


def test_a_worker_beyond_workers_is_refused() -> None:
    with pytest.raises(FaultError, match=r"no worker w3 with --workers 2 \(w1\.\.w2\)"):
        faults.check([faults.parse("worker:kill:w3@1")], 5.0, workers=2)


def test_cli_exit_2_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run_cli(["launch", "--workers", "2", "--seconds", "5",
                         "--fault", "worker:kill:w3@1"], capsys)
    assert_bad_input(code, err, "no worker w3 with --workers 2")
