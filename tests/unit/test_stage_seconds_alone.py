"""``--stage-seconds`` without a ``--rate`` or ``--bypass`` list makes no stages: one warning line
says so and what it does instead (it sets the trial's length in place of ``--seconds``)."""

from __future__ import annotations

from typing import Any

import pytest

from coordinator.cli.commands import cli
from coordinator.cli.launch import config_from
from coordinator.trials.plan import drain_s

WARNING = ("coordinator: warning: --stage-seconds 3 with one stage (no --rate or --bypass list) "
           "makes no stages: each trial lasts warm-up + 3 s + drain")


def _config(args: list[str]) -> Any:
    command = cli.commands["launch"]
    ctx = command.make_context("launch", args)
    with ctx:
        return config_from(dict(ctx.params))


@pytest.mark.parametrize("args", [
    ["--stage-seconds", "3"],
    ["--stage-seconds", "3", "--bypass", "50", "--seconds", "20"],
    ["--stage-seconds", "3", "--rate", "100"],
])
def test_one_stage_warns_once(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    config = _config(args)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(WARNING), err
    assert "--seconds" in err[0]
    assert config.seconds == config.timing.warmup_s + 3 + drain_s(config.ttl_s)  # as documented


@pytest.mark.parametrize("args", [
    ["--stage-seconds", "3", "--bypass", "0,50"],
    ["--stage-seconds", "3", "--rate", "100,200"],
    ["--seconds", "5"],
    ["--preset", "bypass-ramp"],
])
def test_stages_or_no_stage_seconds_say_nothing(args: list[str],
                                                capsys: pytest.CaptureFixture[str]) -> None:
    _config(args)
    assert capsys.readouterr().err == ""
