"""Worker and app processes run pyarrow's C++ pool on glibc's allocator, and do not hand that
setting to the processes they start (worker/__init__.py says why: mimalloc's arena)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.helpers import ROOT

SCRIPT = """
import os, sys
import {package}
import pyarrow
print(pyarrow.default_memory_pool().backend_name, os.environ.get("ARROW_DEFAULT_MEMORY_POOL"))
"""


@pytest.mark.parametrize("package", ["worker", "app"])
def test_the_process_allocates_arrow_memory_with_glibc_and_its_children_need_not(
        package: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    out = subprocess.run([sys.executable, "-c", SCRIPT.format(package=package)], cwd=ROOT,
                         env=env, capture_output=True, text=True, check=True).stdout.split()
    assert out == ["system", "None"], out


def test_a_pool_the_user_chose_is_kept() -> None:
    env = {**os.environ, "ARROW_DEFAULT_MEMORY_POOL": "mimalloc"}
    out = subprocess.run([sys.executable, "-c", SCRIPT.format(package="worker")], cwd=ROOT,
                         env=env, capture_output=True, text=True, check=True).stdout.split()
    assert out == ["mimalloc", "mimalloc"], out
