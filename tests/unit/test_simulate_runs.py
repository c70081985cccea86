"""Simulated run directories and ``coordinator simulate --validate`` (issue 35): report, compare
and rerun read a simulated run like any other, the table simulate prints is the one report
prints, and validation says in or out for each (strategy, figure) of a measured run.

The measured input is tests/data/sim_measured: a real ``coordinator launch --workers 2
--clients 20 --strategies naive,lock-dc --repeat 3 --seconds 4 --ttl 0.5 --scale 20000`` on the
embedded stack (2026-12-02), its hit rows thinned by scripts/prune_run.py (docs/simulate.md)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson
import pytest

from coordinator.cli import main
from results.figures import repeats
from results.figures.intervals import Estimate
from simulate import validate

MEASURED = Path(__file__).parents[1] / "data" / "sim_measured"
TINY = ["--strategies", "naive,lock-dc", "--app-servers", "2", "--clients", "5", "--ttl", "0.2",
        "--think-ms", "5", "--expiries", "2", "--replications", "2"]


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_:
        main(args)
    captured = capsys.readouterr()
    return int(exit_.value.code or 0), captured.out, captured.err


def table_of(out: str) -> list[str]:
    """The title and table lines (up to the first blank line)."""
    return out.split("\n\n", 1)[0].splitlines()


@pytest.fixture
def simulated(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[Path, list[str]]:
    root = tmp_path / "sim"
    code, out, _ = run(["simulate", *TINY, "--out", str(root)], capsys)
    assert code == 0
    return root, table_of(out)


def test_the_run_directory_says_simulated_and_holds_its_world(
        simulated: tuple[Path, list[str]]) -> None:
    root, _ = simulated
    meta = orjson.loads((root / "run.json").read_bytes())
    assert meta["kind"] == "simulated" and meta["strategies"] == ["naive", "lock-dc"]
    assert meta["world"]["app_servers"] == 2 and meta["world"]["ttl_s"] == 0.2
    assert (root / "trials.parquet").is_file() and (root / "expiries.parquet").is_file()


def test_report_prints_the_table_simulate_printed(simulated: tuple[Path, list[str]],
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    root, printed = simulated
    code, out, _ = run(["report", str(root)], capsys)
    assert code == 0 and table_of(out) == printed
    assert printed[0].startswith("simulated:") and printed[3].endswith("simulated")


def test_an_existing_run_is_never_overwritten(simulated: tuple[Path, list[str]],
                                              capsys: pytest.CaptureFixture[str]) -> None:
    root, _ = simulated
    code, _, err = run(["simulate", *TINY, "--out", str(root)], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "already exists" in err


def test_compare_reads_a_measured_and_a_simulated_run(simulated: tuple[Path, list[str]],
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    root, _ = simulated
    code, out, _ = run(["compare", str(MEASURED), str(root)], capsys)
    assert code == 0 and "verdicts per strategy over its repeats" in out
    assert "naive     1       origin/expiry" in out  # repeat 1 against replication 1


def test_rerun_of_a_simulated_run_simulates_again(simulated: tuple[Path, list[str]],
                                                  tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    root, printed = simulated
    code, out, err = run(["rerun", str(root), "--out", str(tmp_path / "again")], capsys)
    assert code == 0 and "rerun of simulated run" in err
    assert table_of(out) == printed  # the same world and seeds: the same figures
    assert orjson.loads((tmp_path / "again" / "run.json").read_bytes())["kind"] == "simulated"


def test_validate_prints_in_or_out_for_each_gated_pair(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["simulate", "--validate", str(MEASURED)], capsys)
    assert code == 0
    lines = out.splitlines()
    for strategy in ("naive", "lock-dc"):
        for figure in ("origin/expiry", "herd max"):
            row = next(ln for ln in lines if f"{strategy}  " in ln and figure in ln)
            assert row.split()[-1] in ("in", "out"), row
        assert any(strategy in ln and "p99 ms" in ln and "not gated" in ln for ln in lines)
    assert "gated figures inside the measured 95 % interval" in lines[-1]


@pytest.mark.parametrize(("args", "says"), [
    (["--validate"], "--validate takes one or more"),
    (["some/dir"], "RUN_DIRs need --validate"),
    (["--validate", "/nonexistent/run"], "/nonexistent/run"),
    (["--validate", str(MEASURED), "--replications", "5"], "10 or more replications"),
    (["--validate", str(MEASURED), "--clients", "5"], "--clients cannot be given with it"),
])
def test_validate_bad_input_is_one_line_and_exit_2(args: list[str], says: str,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["simulate", *args], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and says in err, err


def test_the_gate_needs_three_repeats_and_a_measured_interval() -> None:
    measured = Estimate(10.0, 8.0, 12.0, n=9, need=8)
    assert validate.verdict("origin_per_expiry", measured, 11.0, 3) == "in"
    assert validate.verdict("herd_max", measured, 13.0, 3) == "out"
    assert validate.verdict("herd_max", measured, 11.0, 2).startswith("no gate: 2 repeat(s)")
    few = Estimate(10.0, n=6, need=8)
    assert validate.verdict("origin_per_expiry", few, 10.0, 3) == "no gate: n=6: too few events"
    assert validate.verdict("p99_ms", measured, 50.0, 3) == "not gated"


def test_the_measured_herd_max_is_the_largest_pooled_herd_with_an_interval() -> None:
    trials = [{"trial": i, "herd_max": 0} for i in (1, 2, 3)]
    events = {i: repeats.TrialEvents(np.array([5.0, 9.0, 7.0]) + i, None) for i in (1, 2, 3)}
    found = repeats.herd_max(trials, events)
    assert found.value == 12.0 and found.known and found.lo <= 12.0 <= found.hi


def test_validate_refuses_a_simulated_run(simulated: tuple[Path, list[str]],
                                          capsys: pytest.CaptureFixture[str]) -> None:
    root, _ = simulated
    code, _, err = run(["simulate", "--validate", str(root)], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "is a simulated run" in err, err


def test_a_measured_strategy_the_model_cannot_run_is_listed_as_not_modelled() -> None:
    assert validate.modelled("lock-dc") and validate.modelled("xfetch:beta=1")
    assert validate.modelled("local-lock:distributed=false")
    assert validate.modelled("two-level") and validate.modelled("two-level:on_cache_error=origin")
    assert not validate.modelled("dogpile")


def test_rerun_of_a_simulated_run_refuses_the_options_it_cannot_apply(
        simulated: tuple[Path, list[str]], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    root, _ = simulated
    code, _, err = run(["rerun", str(root), "--repeat", "2", "--out", str(tmp_path / "x")], capsys)
    assert code == 2 and "only --out applies (drop --repeat)" in err
    assert not (tmp_path / "x").exists()
