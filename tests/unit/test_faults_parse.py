"""Fault specs (pure): every accepted form and every rejection names what is allowed."""

from __future__ import annotations

import math

import pytest

from coordinator import faults
from coordinator.faults.spec import Action, Fault, FaultError, Target


@pytest.mark.parametrize(("spec", "expected"), [
    ("lock-store:kill@5", Fault(Target.LOCK_STORE, Action.KILL, 5.0)),
    ("lock-store:pause@4", Fault(Target.LOCK_STORE, Action.PAUSE, 4.0)),
    ("lock-store:pause@4+2", Fault(Target.LOCK_STORE, Action.PAUSE, 4.0, 2.0)),
    ("cache:kill@0", Fault(Target.CACHE, Action.KILL, 0.0)),
    ("origin:lock@3+2", Fault(Target.ORIGIN, Action.LOCK, 3.0, 2.0)),
    ("origin:exhaust@1.5", Fault(Target.ORIGIN, Action.EXHAUST, 1.5)),
    ("worker:kill@3", Fault(Target.WORKER, Action.KILL, 3.0)),
    ("broker:restart@10", Fault(Target.BROKER, Action.RESTART, 10.0)),
])
def test_parse_accepts(spec: str, expected: Fault) -> None:
    fault = faults.parse(spec)
    assert fault == expected
    assert faults.parse(fault.label) == fault  # the label round-trips


@pytest.mark.parametrize(("spec", "says"), [
    ("lock-store", "TARGET:ACTION@SECONDS"),
    ("lock-store:kill", "TARGET:ACTION@SECONDS"),
    ("db:kill@1", "allowed: lock-store, cache, origin, worker, broker"),
    ("lock-store:explode@1", "allowed: kill, pause"),
    ("worker:pause@1", "allowed: kill"),
    ("lock-store:kill@soon", "'soon' is not a number"),
    ("lock-store:kill@-1", ">= 0"),
    ("lock-store:kill@nan", ">= 0"),
    ("origin:kill@1+2", "cannot"),
    ("worker:kill@1+2", "takes no +DURATION"),
    ("lock-store:pause@1+0", "DURATION must be > 0"),
    ("lock-store:pause@1+x", "'x' is not a number"),
])
def test_parse_rejects(spec: str, says: str) -> None:
    with pytest.raises(FaultError) as info:
        faults.parse(spec)
    assert says in str(info.value)


def test_check_instants_against_trial_length() -> None:
    faults.check([faults.parse("lock-store:kill@4.9"), faults.parse("broker:restart@5")], 5.0)
    with pytest.raises(FaultError, match="not inside the trial"):
        faults.check([faults.parse("cache:kill@5")], 5.0)
    with pytest.raises(FaultError, match="between trials"):
        faults.check([faults.parse("broker:restart@2")], 5.0)


def test_end_of_effect() -> None:
    assert faults.parse("lock-store:pause@1+2").end_s(10) == 3
    assert faults.parse("lock-store:pause@1+20").end_s(10) == 10  # lifted at the trial's end
    assert faults.parse("lock-store:pause@1").end_s(10) == 10
    assert faults.parse("lock-store:kill@1").end_s(10) == 10  # dead until restarted
    assert faults.parse("broker:restart@12").end_s(10) == 12
    assert faults.label([]) == ""
    assert faults.label([faults.parse("cache:kill@1"), faults.parse("origin:lock@2+1")]) == \
        "cache:kill@1;origin:lock@2+1"
    assert not math.isnan(faults.parse("cache:kill@1").at_s)
