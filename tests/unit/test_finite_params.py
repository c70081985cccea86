"""Strategy parameters refuse non-finite numbers: ``inf`` and ``nan`` are floats to Python, not
to an experiment (``xfetch:beta=inf`` used to run)."""

from __future__ import annotations

from dataclasses import fields

import pytest

import strategies
from strategies.registry import _REGISTRY
from tests.helpers import assert_bad_input, run_cli

FLOAT_PARAMS = sorted({(name, f.name) for name, cls in _REGISTRY.items()
                       for f in fields(cls.Params) if isinstance(f.default, float)})


def test_every_float_parameter_is_covered() -> None:
    assert ("xfetch", "beta") in FLOAT_PARAMS and ("lock", "max_wait_ms") in FLOAT_PARAMS


@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "Infinity", "1e999"])
@pytest.mark.parametrize(("name", "key"), FLOAT_PARAMS)
def test_float_parameters_refuse_non_finite(name: str, key: str, value: str) -> None:
    with pytest.raises(strategies.InvalidStrategy,
                       match=f"^{name}: {key}='{value}' is not a finite number$"):
        strategies.parse(f"{name}:{key}={value}")


def test_a_task_from_the_network_is_refused_the_same() -> None:
    with pytest.raises(strategies.InvalidStrategy, match="beta='inf' is not a finite number"):
        strategies.from_mapping("xfetch", {"beta": float("inf")})


def test_finite_values_still_parse() -> None:
    assert strategies.parse("xfetch:beta=1e3").params["beta"] == 1000.0


def test_cli_exit_2_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run_cli(["launch", "--strategies", "naive,xfetch:beta=inf"], capsys)
    assert_bad_input(code, err, "xfetch: beta='inf' is not a finite number")
