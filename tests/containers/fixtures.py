"""The session fixture of the container tests (registered in tests/conftest.py).

``container_images`` keeps one Docker engine up and the images built for the whole session; on
a machine where the engine cannot start, every test using it is skipped, under one line saying
why (pytest would name each test's own line; the report hook below folds them into one).
"""

from __future__ import annotations

import contextlib
from collections.abc import Generator, Iterator
from typing import NoReturn

import pytest

from tests.containers.engine import EngineUnavailable, Images, docker_engine, ensure_images

SKIPPED = "container tests skipped: "


@pytest.fixture(scope="session")
def container_images() -> Iterator[Images]:
    """The project image and the Redis / PostgreSQL images, with a running engine around them."""
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(docker_engine())
        except EngineUnavailable as exc:
            _skip(exc)
        yield ensure_images()


def _skip(exc: EngineUnavailable) -> NoReturn:
    pytest.skip(f"{SKIPPED}{exc}")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None],
                              ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """One location for every skip for want of an engine, so ``-ra`` folds them into one line."""
    report = yield
    longrepr = report.longrepr
    if report.skipped and isinstance(longrepr, tuple) and SKIPPED in str(longrepr[2]):
        report.longrepr = (__file__, _skip.__code__.co_firstlineno, longrepr[2])
    return report
