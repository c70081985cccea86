"""The example plug-in's own test (examples/singleflight-plugin/tests), run as its README says:
its package on the path, against a real Redis it starts itself."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.helpers import ROOT

EXAMPLE = ROOT / "examples" / "singleflight-plugin"


def test_the_example_plugins_own_test_passes() -> None:
    env = {**os.environ, "PYTHONPATH": f"{EXAMPLE}{os.pathsep}{ROOT}"}
    done = subprocess.run([sys.executable, "-m", "pytest", str(EXAMPLE / "tests"), "-q",
                           "-p", "no:cacheprovider"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "6 passed" in done.stdout, done.stdout
