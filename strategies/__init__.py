"""Stampede defences: pure cache logic behind one small Protocol and a registry by name.

Importing this package registers every built-in strategy.
"""

from strategies import fronts, lease, local, lock, naive, swr, twolevel, xfetch
from strategies.base import (
    Background,
    Deps,
    Loader,
    LockStoreDown,
    LockWaitTimeout,
    Outcome,
    Probe,
    Strategy,
    StrategyError,
    close_strategy,
)
from strategies.params import ExpiryGrid
from strategies.registry import InvalidStrategy, StrategySpec, from_mapping, names, parse, register

__all__ = [
    "Background",
    "Deps",
    "ExpiryGrid",
    "InvalidStrategy",
    "Loader",
    "LockStoreDown",
    "LockWaitTimeout",
    "Outcome",
    "Probe",
    "Strategy",
    "StrategyError",
    "StrategySpec",
    "close_strategy",
    "from_mapping",
    "fronts",
    "lease",
    "local",
    "lock",
    "naive",
    "names",
    "parse",
    "register",
    "swr",
    "twolevel",
    "xfetch",
]
