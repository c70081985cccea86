"""docs/results.md stays true: every example runs on a real run (its columns: tests/unit)."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from results.outputs import report_data
from tests.helpers import ROOT

DOC = ROOT / "docs" / "results.md"
EXAMPLES = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)


def run_example(code: str, run_dir: Path) -> Any:
    namespace: dict[str, Any] = {"RUN_DIR": str(run_dir)}
    exec(compile(code, str(DOC), "exec"), namespace)  # the documented example, as written
    return namespace["result"]


def test_examples_run_against_a_real_run(real_run: Path) -> None:
    assert len(EXAMPLES) >= 5
    results = [run_example(code, real_run) for code in EXAMPLES]
    per_expiry, p99, pandas_p99, _stale, statements = results
    assert set(per_expiry["strategy"]) == {"naive", "lock"}
    assert statements["is_origin"].any()
    # The documented queries agree with the report's own exact percentiles.
    report = {r["strategy"]: r for r in report_data.load(real_run).latency}
    for _, row in p99.iterrows():
        assert math.isclose(row["p99_ms"], report[row["strategy"]]["p99_ms"], rel_tol=1e-9)
        assert row["requests"] == report[row["strategy"]]["requests"]
    for strategy, value in pandas_p99["p99_ms"].items():
        assert math.isclose(value, report[str(strategy)]["p99_ms"], rel_tol=1e-9)
