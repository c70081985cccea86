"""The intervals on real trials (issue 26): one run's interval holds most other runs' values,
``coordinator compare`` tells naive from lock-dc and not one run of naive from another.

Short trials (2 workers, 24 clients, TTL 0.25 s, 6 s: about fifteen expiries each), the same
command twice for naive, once for lock-dc.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from results.figures import intervals
from results.store import rundir
from tests.helpers import coordinator

# --force-clock: the embedded stack's workers share this host's clock, and a TTL of 0.25 s allows
# an offset uncertainty of 12.5 ms, which the measurement alone exceeded on a loaded machine
# (+-12.7 ms: the run failed before its first trial).
# 6 s: 19 periods; at 4 s (11) naive's herds, drifting half a TTL each under load, left 4 of 12
# trials with fewer than 8 events and no interval (issue 31). Another run's value falls inside a
# run's interval about as often at any length: both narrow as one over the root of the events.
COMMAND = ("--workers", "2", "--clients", "24", "--ttl", "0.25", "--seconds", "6",
           "--scale", "20000", "--quiet", "--force-clock")
REPEATS = 6
# Measured (docs/results.md, 2026-12-01): a trial's interval held 69 % of the other 11 trials'
# values, over 12 trials (132 cases). The test's bound is the binomial's: the fewest cases held
# that a run with that coverage reaches but for a chance of FLAKE. The cases are not independent
# (each interval and each value is in 11 of them), so the real spread is wider than the
# binomial's; hence the small FLAKE.
MEASURED = 0.69
FLAKE = 0.001
NARROW = 0.25  # the pair: intervals a quarter as wide hold about a fifth (normal errors)


def launch(out: Path, strategy: str, repeat: int) -> Path:
    done = coordinator("launch", *COMMAND, "--strategies", strategy, "--repeat", str(repeat),
                       "--out", str(out), timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("intervals")
    return {"naive": launch(root / "naive", "naive", REPEATS),
            "naive again": launch(root / "naive-again", "naive", REPEATS),
            "lock-dc": launch(root / "lock-dc", "lock-dc", 2)}


def fewest_held(cases: int, coverage: float = MEASURED) -> int:
    """The fewest of ``cases`` held that Binomial(cases, coverage) falls below with a chance of at
    most FLAKE."""
    k, cdf = intervals.binomial_cdf(cases, coverage)
    below = k[cdf <= FLAKE]
    return int(below[-1]) + 1 if below.size else 0


def held(trials: list[dict[str, Any]], narrow: float = 1.0) -> tuple[int, int]:
    """(cases held, cases): each trial's interval of origin calls per event (``narrow`` times
    as wide about its figure) against every other trial's figure."""
    inside = cases = 0
    for t in trials:
        value, lo, hi = (t[f"origin_per_expiry{s}"] for s in ("", "_lo", "_hi"))
        lo, hi = value - narrow * (value - lo), value + narrow * (hi - value)
        others = [o["origin_per_expiry"] for o in trials if o is not t]
        inside += sum(lo <= v <= hi for v in others)
        cases += len(others)
    return inside, cases


def naive_trials(runs: dict[str, Path]) -> list[dict[str, Any]]:
    trials = [t for name in ("naive", "naive again") for t in rundir.read_trials(runs[name]).to_pylist()]
    with_interval = [t for t in trials if math.isfinite(t["origin_per_expiry_lo"])]
    assert len(with_interval) >= len(trials) - 2, [t["expiry_events"] for t in trials]
    return with_interval


def test_one_runs_interval_holds_most_other_runs_values(runs: dict[str, Path]) -> None:
    """Every naive trial's interval of origin calls per event against the other trials' values
    (a calibrated 95 % interval holds another run's value about 83 % of the time: both vary),
    at least as often as the measured 69 % allows (``fewest_held``)."""
    trials = naive_trials(runs)
    inside, cases = held(trials)
    summary = [(round(t["origin_per_expiry"], 1), round(t["origin_per_expiry_lo"], 1),
                round(t["origin_per_expiry_hi"], 1)) for t in trials]
    assert cases >= 100 and inside >= fewest_held(cases), (inside, cases, fewest_held(cases), summary)


def test_intervals_a_quarter_as_wide_hold_too_few(runs: dict[str, Path]) -> None:
    """The pair: the same check on intervals cut to a quarter of their width fails it."""
    inside, cases = held(naive_trials(runs), NARROW)
    assert inside < fewest_held(cases), (inside, cases)


def test_compare_says_naive_and_lock_dc_differ(runs: dict[str, Path]) -> None:
    done = coordinator("compare", str(runs["naive"]), str(runs["lock-dc"]))
    assert done.returncode == 0, done.stderr
    assert verdict(done.stdout, "origin/expiry") == "different", done.stdout


def test_compare_says_two_runs_of_one_command_are_not_distinguishable(runs: dict[str, Path]) -> None:
    done = coordinator("compare", str(runs["naive"]), str(runs["naive again"]))
    assert done.returncode == 0, done.stderr
    assert "configuration: the same" in done.stdout or "setting(s) differ" in done.stdout
    assert verdict(done.stdout, "origin/expiry") == "not distinguishable", done.stdout


def verdict(text: str, figure: str) -> str:
    """The verdict of ``figure`` in compare's verdict table (its first such line)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("verdicts per strategy"))
    row = next(line for line in lines[start:] if f"  {figure}  " in f"  {line}  ")
    return row.rsplit("  ", 1)[-1].strip()
