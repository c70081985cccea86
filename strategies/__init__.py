"""Stampede defences: pure cache logic behind one small Protocol and a registry by name.

Importing this package registers every built-in strategy.
"""

from strategies import lock, naive
from strategies.base import Deps, Loader, LockWaitTimeout, Outcome, Probe, Strategy, StrategyError
from strategies.registry import InvalidStrategy, StrategySpec, from_mapping, names, parse

__all__ = [
    "Deps",
    "InvalidStrategy",
    "Loader",
    "LockWaitTimeout",
    "Outcome",
    "Probe",
    "Strategy",
    "StrategyError",
    "StrategySpec",
    "from_mapping",
    "lock",
    "naive",
    "names",
    "parse",
]
