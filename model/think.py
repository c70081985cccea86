"""Think time as Locust users know it (``wait_time``): a closed-loop client's pause after each
request, constant, uniform between two bounds, exponential, or constant pacing (each cycle,
request and pause together, lasts a given time; a slow request leaves no pause).

``--think constant:MS | uniform:MIN:MAX | exponential:MEAN | pacing:MS`` (milliseconds).
Each client draws from its own seeded generator, so a run is repeatable.
"""

from __future__ import annotations

import enum
import math
import random
from collections.abc import Callable
from dataclasses import dataclass

MAX_MS = 60_000.0


class ThinkKind(enum.StrEnum):
    CONSTANT = "constant"  # Locust's constant(s)
    UNIFORM = "uniform"  # between(a, b)
    EXPONENTIAL = "exponential"  # a Poisson client: exponential pauses of this mean
    PACING = "pacing"  # constant_pacing(s): the cycle lasts s, the pause is what is left


class InvalidThink(ValueError):
    """A ``--think`` that is not one of the four forms (one line: what is allowed)."""


Pause = Callable[[float], float]  # the request's own duration (s) -> the pause after it (s)


@dataclass(frozen=True)
class ThinkTime:
    kind: ThinkKind = ThinkKind.CONSTANT
    low_ms: float = 0.0  # constant, uniform's low bound, exponential's mean, pacing's cycle
    high_ms: float = 0.0  # uniform's high bound

    def __post_init__(self) -> None:
        for value in (self.low_ms, self.high_ms):
            if not 0 <= value <= MAX_MS or math.isnan(value):
                raise InvalidThink(f"--think {self.label}: {value:g} ms is outside [0, {MAX_MS:g}]")
        if self.kind is ThinkKind.UNIFORM and self.high_ms < self.low_ms:
            raise InvalidThink(f"--think {self.label}: the high bound is below the low one")

    @classmethod
    def parse(cls, text: str) -> ThinkTime:
        parts = text.strip().split(":")
        wrong = InvalidThink(f"{text!r} is not constant:MS, uniform:MIN:MAX, exponential:MEAN "
                             "or pacing:MS (e.g. uniform:1000:5000)")
        try:
            kind = ThinkKind(parts[0])
            numbers = [float(p) for p in parts[1:]]
        except ValueError:
            raise wrong from None
        if len(numbers) != (2 if kind is ThinkKind.UNIFORM else 1):
            raise wrong
        return cls(kind, numbers[0], numbers[1] if len(numbers) > 1 else 0.0)

    @property
    def label(self) -> str:
        if self.kind is ThinkKind.UNIFORM:
            return f"uniform:{self.low_ms:g}:{self.high_ms:g}"
        return f"{self.kind.value}:{self.low_ms:g}"

    @property
    def none(self) -> bool:
        return self.low_ms == 0 and self.high_ms == 0

    def pauses(self, seed: int) -> Pause:
        """One client's pause after each request, given how long the request took."""
        rng = random.Random(seed)
        low, high = self.low_ms / 1000, self.high_ms / 1000
        if self.kind is ThinkKind.UNIFORM:
            return lambda _: rng.uniform(low, high)
        if self.kind is ThinkKind.EXPONENTIAL:
            return lambda _: rng.expovariate(1 / low) if low > 0 else 0.0
        if self.kind is ThinkKind.PACING:
            return lambda took: max(0.0, low - took)
        return lambda _: low
