"""The app process's own CPU: one interpreter that a client waits for after each reply.

Why it is modelled: a measured load generator is Python threads in a few processes on a few
cores. A reply that has arrived is handled only once its thread holds the interpreter (the GIL,
and a core for its process). Under load that wait, not the network, is most of a hit's latency
(a 28 us floor under a 10 ms median hit, docs/simulate.md), and a filler pays it between its
GET reply and its origin call, which lengthens the fill window and so the herd.

Modelled as one first-come-first-served server per app process, kept as a float: the instant
its interpreter is next free. A turn is booked when a reply arrives; it begins at
max(now, free_at) and lasts ``hold_s`` (the process's CPU per request, ``simulate.calibrate``).
No simpy Resource: a turn is one timeout, and the hits counted in bulk (``simulate.bulk``)
take the queue's steady-state wait (``closed_wait_s``) instead of booking turns one by one.
"""

from __future__ import annotations

from functools import lru_cache


class Interpreter:
    """One app process's interpreter: the instant it is next free, and its hold per reply."""

    def __init__(self, hold_s: float) -> None:
        self.hold_s = hold_s
        self.free_at = 0.0

    def turn(self, now: float, hold_s: float | None = None) -> float:
        """Book the next turn for a reply that arrives at ``now``: the instant it ends."""
        start = now if now > self.free_at else self.free_at
        self.free_at = start + (self.hold_s if hold_s is None else hold_s)
        return self.free_at


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
