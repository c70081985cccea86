"""The app process's own CPU: one interpreter that a client waits for after each reply.

Why it is modelled: a measured load generator is Python threads in a few processes on a few
cores. A reply that has arrived is handled only once its thread holds the interpreter (the GIL,
and a core for its process). Under load that wait, not the network, is most of a hit's latency
(a 28 us floor under a 10 ms median hit, docs/simulate.md), and a filler pays it between its
GET reply and its origin call, which lengthens the fill window and so the herd.

Modelled as one server per app process that holds each reply's turn for ``hold_s`` (the
process's CPU per request, ``simulate.calibrate``), in one of two orders:

- ``Interpreter``, first come first served, kept as a float: the instant the interpreter is
  next free. A turn is booked when the reply arrives, begins at max(now, free_at): one timeout.
- ``RandomOrder``: when a turn ends, the next is any waiting reply, drawn at random (CPython
  hands the GIL to whichever waiting thread the OS wakes, which need not be the one that
  waited longest). Two simpy events a turn. Validated against issue 35's runs and not the
  default: a filler drawn early keeps its fill window short, and naive's herds at 4 x 200 were
  42 where the measured ones were 176 (12 of 16 figures in, against 13 first come first
  served; docs/simulate.md).

Neither is a simpy Resource, and the hits counted in bulk (``simulate.bulk``) take the queue's
steady-state mean wait (``closed_wait_s``, the same for both orders) instead of booking turns.
"""

from __future__ import annotations

import random
from functools import lru_cache

import simpy

ORDERS = ("fifo", "random")


class Interpreter:
    """One app process's interpreter, first come first served: the instant it is next free."""

    def __init__(self, env: simpy.Environment, hold_s: float) -> None:
        self.env, self.hold_s = env, hold_s
        self.free_at = 0.0

    def turn(self, now: float, hold_s: float | None = None) -> float:
        """Book the next turn for a reply that arrives at ``now``: the instant it ends."""
        start = now if now > self.free_at else self.free_at
        self.free_at = start + (self.hold_s if hold_s is None else hold_s)
        return self.free_at

    def wait(self, hold_s: float | None = None) -> simpy.Event:
        """An event at the end of the turn of a reply that arrives now."""
        return self.env.timeout(self.turn(self.env.now, hold_s) - self.env.now)


class RandomOrder:
    """One app process's interpreter that serves its waiting replies in random order."""

    def __init__(self, env: simpy.Environment, hold_s: float, rng: random.Random) -> None:
        self.env, self.hold_s, self._rng = env, hold_s, rng
        self._busy = False
        self._waiting: list[tuple[simpy.Event, float]] = []

    def wait(self, hold_s: float | None = None) -> simpy.Event:
        """An event at the end of the turn of a reply that arrives now."""
        done = self.env.event()
        hold = self.hold_s if hold_s is None else hold_s
        if self._busy:
            self._waiting.append((done, hold))
        else:
            self._start(done, hold)
        return done

    def _start(self, done: simpy.Event, hold_s: float) -> None:
        self._busy = True
        self.env.timeout(hold_s).callbacks.append(lambda _: self._end(done))

    def _end(self, done: simpy.Event) -> None:
        done.succeed()
        waiting = self._waiting
        if not waiting:
            self._busy = False
            return
        i = self._rng.randrange(len(waiting))
        waiting[i], waiting[-1] = waiting[-1], waiting[i]
        self._start(*waiting.pop())


def interpreter(env: simpy.Environment, hold_s: float, order: str,
                rng: random.Random) -> Interpreter | RandomOrder:
    """The interpreter of one app process in ``order`` (``ORDERS``)."""
    if order == "fifo":
        return Interpreter(env, hold_s)
    if order == "random":
        return RandomOrder(env, hold_s, rng)
    raise ValueError(f"CPU order {order!r}: one of {', '.join(ORDERS)}")


@lru_cache(maxsize=64)
def closed_wait_s(clients: int, hold_s: float, delay_s: float) -> float:
    """The mean wait for a turn (the hold not included) of ``clients`` closed-loop clients
    sharing one interpreter, each spending ``delay_s`` away from it between two turns (its
    round trip and think time): exact mean value analysis of that two-station closed network
    (for exponential holds; at saturation, where it matters, it tends to clients x hold less
    one cycle for any hold distribution). Why analytic: a hit counted in bulk does not book a
    turn, so its wait has to be what the queue would have made it."""
    if hold_s <= 0 or clients <= 0:
        return 0.0
    queue = 0.0
    response = hold_s
    for n in range(1, clients + 1):
        response = hold_s * (1.0 + queue)
        queue = n * response / (delay_s + response)
    return response - hold_s
