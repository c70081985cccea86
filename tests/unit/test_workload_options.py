"""Presets and workload options: explicit options win, bad input is one line and exit 2."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from coordinator.cli.commands import cli, main
from coordinator.cli.launch import config_from
from coordinator.trials.plan import DRAIN_MAX_S
from coordinator.trials.priming import first_expiry_ms
from results.figures import metrics
from results.store.schema import DROPPED


def _config(args: list[str]) -> Any:
    command = cli.commands["launch"]
    ctx = command.make_context("launch", args)
    with ctx:
        return config_from(dict(ctx.params))


def test_preset_fills_defaults_and_explicit_options_win() -> None:
    config = _config(["--preset", "bypass-ramp", "--pool-size", "7"])
    work = config.workload
    assert config.pool_size == 7  # explicit
    assert work.rates == (400.0,) and work.bypass == (0, 0.25, 0.5, 0.75, 1.0)
    assert [e.name for e in work.endpoints] == ["product", "ranking"]
    assert config.seconds == config.timing.warmup_s + 5 * 10.0 + DRAIN_MAX_S  # warm-up + stages


def test_single_flight_preset_is_the_hot_key_closed_loop() -> None:
    config = _config(["--preset", "single-flight", "--seconds", "5"])
    assert config.seconds == 5 and config.clients == 200
    assert not config.workload.open_loop and config.keys == ("orders:0",)


@pytest.mark.parametrize(("args", "fragment"), [
    (["--keys", "zipf:10"], "--keys"),
    (["--rate", "ten"], "--rate"),
    (["--bypass", "0,150", "--stage-seconds", "2"], "--bypass"),
    (["--bypass", "0,50"], "--stage-seconds"),
])
def test_bad_workload_input_is_one_line(args: list[str], fragment: str,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["launch", *args])
    assert done.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and fragment in err


def test_first_expiries_spread_only_with_jitter() -> None:
    import random
    rng = random.Random(1)
    plain = {first_expiry_ms(10**12, 10_000, 0.0, rng) for _ in range(100)}
    spread = [first_expiry_ms(10**12, 10_000, 0.2, rng) for _ in range(100)]
    assert plain == {10**6 + 5_000}
    assert min(spread) >= 10**6 + 3_000 and max(spread) <= 10**6 + 7_000
    assert max(spread) - min(spread) > 2_000


def test_peak_per_second_and_send_accounting() -> None:
    s = 10**9
    starts = pa.array([0, s // 2, s + 1, s + 2, s + 3, 3 * s], pa.int64())
    assert metrics.peak_per_second(starts, 0) == 3
    rows = pa.table({
        "t_intended_ns": pa.array([0, 0, 0, 0], pa.int64()),
        "t_start_ns": pa.array([0, 5_000_000, 50_000_000, 2 * s], pa.int64()),
        "error": pa.array([None, None, None, f"{DROPPED}: late"], pa.string()),
    })
    assert metrics.sends(rows) == {"late_sends": 1, "dropped_sends": 1}

