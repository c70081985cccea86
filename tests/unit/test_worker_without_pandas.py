"""A worker or app process never imports pandas, which pyarrow would pull in on its own.

pyarrow imports pandas, when it is installed (the [dev] venv has it), at its first array and at
every later array or scalar whose type it has to infer: 32 MB of a worker process's memory
(bench/soak.py's target is per worker). worker.recorder answers the first look; every array a
worker or app process builds names its type. This test builds what a trial builds (a wire
batch with an error row, encoded and decoded) in a fresh interpreter and looks.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from tests.helpers import ROOT

SCRIPT = """
import sys
import worker.tasks, app.trial
from results.store import transport
from strategies import Outcome, Probe
from worker.recorder import Recorder
rec = Recorder(0, ["k"])
rec.add(0, 1, 2, Outcome.HIT, Probe(), None)
rec.add(0, 3, 4, Outcome.ERROR, Probe(), "ConnectionError: refused")
table = transport.decode(transport.encode(rec.to_batch()))
assert table.column("error").to_pylist() == [None, "ConnectionError: refused"]
print("pandas" in sys.modules)
"""


@pytest.mark.skipif(importlib.util.find_spec("pandas") is None,
                    reason="pandas is not installed here: nothing for pyarrow to import")
def test_a_trials_batches_do_not_import_pandas() -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False", "pandas was imported by a worker's own work"
