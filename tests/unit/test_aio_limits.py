"""The asyncio driver's open-file limit: raised to two descriptors a client and some, never
lowered (worker.aio.trial.raise_fd_limit)."""

from __future__ import annotations

import resource
from collections.abc import Iterator

import pytest

from worker.aio.trial import FD_SLACK, raise_fd_limit


@pytest.fixture
def restored() -> Iterator[None]:
    limits = resource.getrlimit(resource.RLIMIT_NOFILE)
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, limits)


def test_the_soft_limit_covers_the_clients_up_to_the_hard_one(restored: None) -> None:
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(1024, hard), hard))
    need = 2 * 2_000 + FD_SLACK
    got = raise_fd_limit(2_000)
    assert got == resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    assert got >= min(need, hard)


def test_a_limit_already_high_enough_is_left_alone(restored: None) -> None:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert raise_fd_limit(1) == soft
    assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] == soft
