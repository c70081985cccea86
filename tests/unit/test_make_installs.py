"""What each make target installs (issue 31): the demo the run's extras only, the tests [dev] too.

Read from ``make -n -B`` (what make would run from scratch), so nothing is installed here.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def planned(target: str) -> str:
    if shutil.which("make") is None:
        pytest.skip("no make on this machine")
    done = subprocess.run(["make", "-n", "-B", target], cwd=ROOT, capture_output=True, text=True,
                          check=True, timeout=30)
    return done.stdout


def installs(plan: str) -> list[str]:
    """The extras of each ``pip install -e '.[...]'`` in order."""
    return re.findall(r"pip install --quiet (?:-c \S+ )?-e '\.\[([^\]]*)\]'", plan)


def test_demo_installs_the_run_extras_and_no_test_tools() -> None:
    plan = planned("demo")
    assert installs(plan) == ["local,libraries"]
    assert "[dev]" not in plan and "coordinator launch" in plan


@pytest.mark.parametrize("target", ["test", "test-unit", "lint", "setup"])
def test_test_targets_install_dev(target: str) -> None:
    assert installs(planned(target)) == ["dev"]


def test_each_install_has_a_stamp_of_its_own() -> None:
    """``make demo`` then ``make test``: the demo's stamp does not stand for the tests' install."""
    demo, test = planned("demo"), planned("test")
    stamp = re.compile(r"touch (\S+\.installed-\w+)")
    assert stamp.findall(demo) != stamp.findall(test)
    assert len(stamp.findall(demo)) == len(stamp.findall(test)) == 1


@pytest.mark.parametrize("target", ["demo", "test"])
def test_installs_take_the_pinned_versions(target: str) -> None:
    """Every project install is constrained by constraints.txt: a fresh clone gets the versions
    the last commit was tested with (redis-py 8.2, published after a green commit, failed a
    clone's mypy), and a stamp older than the pins installs again."""
    plan = planned(target)
    lines = [line for line in plan.splitlines() if "pip install" in line and " -e " in line]
    assert lines and all("-c constraints.txt" in line for line in lines), lines
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^\$\(DEV_STAMP\):.*constraints\.txt", makefile, re.M)
    assert re.search(r"^\$\(DEMO_STAMP\):.*constraints\.txt", makefile, re.M)
