"""two-level as logic: an in-process copy per key (``local_ttl_ms``) in front of lock-dc.

The local layer is plain state of the core, shared by the process's requests: a hit on it is
a plain function (``local_hit``), a read from the cache stores a local copy only if no
invalidation arrived while it was in flight (the ``generation`` read before the GET), and the
fill publishes the key so that every process drops its copy. Its local TTL is on the core's
clock (``Deps.clock``: the system's, a scripted one, simulated time).

Who hears the publishes is the driver's business, not the logic's: the core is a subscriber
(``strategies.core.effects.Subscriber``): it names its ``channel``, and a message on it goes to
``heard`` (drop the local copy), a lost subscription to ``outage``. The threaded driver listens
on a thread (``strategies.drivers.listen``), the asyncio driver on a task
(``strategies.drivers.aio_listen``), the simulator's store delivers each publish to the
subscribed app processes half a round trip later (``simulate.store``).

A request does not start with a GET (the local copy comes first), so the core is one generator
(``steps``, as lease's) for the asyncio driver and the simulator; the threaded strategy calls
the same functions inline, so a local or a cache hit starts no generator there.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from strategies import version
from strategies.base import HIT, Clock, Outcome, Probe
from strategies.commands import set_command
from strategies.core.cacheaside import LockCore
from strategies.core.effects import CACHE, Get, Load, Pipeline
from strategies.params import LockParams, Ttl

CHANNEL = "stampede:invalidate"


class PublishingLockCore(LockCore):
    """lock-dc whose fill also publishes the key (every process drops its local copy)."""

    def fill(self, key: str, probe: Probe) -> Generator[Any, Any, None]:
        value = yield Load(key)
        version.served(probe, value)
        sent = self.clock.wall_ns()
        expiry = self.ttl.draw(sent // 1_000_000)
        yield Pipeline(CACHE, (set_command(key, value, px=expiry.px, pxat=expiry.pxat),
                               ("PUBLISH", CHANNEL, key)))
        version.stored(probe, value, sent)


class TwoLevelCore:
    """The local layer in front of ``PublishingLockCore`` (``remote``); no ``hit`` of its
    own: the drivers run ``steps`` whole."""

    channel: str = CHANNEL

    def __init__(self, ttl: Ttl, clock: Clock, params: LockParams, local_ttl_ms: float) -> None:
        self.remote = PublishingLockCore(ttl, clock, params, double_check=True)
        self.clock = clock
        self._local_ttl_ns = int(local_ttl_ms * 1e6)
        self.local: dict[str, tuple[int, bytes]] = {}  # key -> (expiry on clock.now_ns, value)
        self.generation = 0  # bumped by every invalidation: a racing read stores no copy

    def local_hit(self, key: str, probe: Probe) -> Outcome | None:
        """The process's own copy, if it has not expired locally."""
        entry = self.local.get(key)
        if entry is None or entry[0] <= self.clock.now_ns():
            return None
        probe.local_hit = 1
        version.served_decoded(probe, entry[1])  # the process holds its copy decoded
        return HIT

    def remote_hit(self, key: str, raw: bytes | None, generation: int, probe: Probe,
                   ) -> Outcome | None:
        """The cache's reply to a GET sent at ``generation``; a value is kept locally unless
        an invalidation came in meanwhile."""
        if raw is None:
            return None
        version.served(probe, raw)
        if generation == self.generation:
            self.local[key] = (self.clock.now_ns() + self._local_ttl_ns, raw)
        return HIT

    def invalidate(self, key: str) -> None:
        """Someone rewrote ``key``: drop the local copy."""
        self.generation += 1
        self.local.pop(key, None)

    def heard(self, data: bytes | str) -> None:
        """A message on ``channel`` (a rewritten key), as the driver's listener received it."""
        self.invalidate(data.decode() if isinstance(data, bytes) else data)

    def outage(self) -> None:
        """The listener lost the channel: invalidations may be missed, so no read racing
        the outage stores a copy."""
        self.generation += 1

    def steps(self, key: str, probe: Probe) -> Generator[Any, Any, Outcome]:
        """A whole request as one generator (what the threaded ``fetch`` does inline)."""
        outcome = self.local_hit(key, probe)
        if outcome is not None:
            return outcome
        generation = self.generation
        raw = yield Get(CACHE, key)
        outcome = self.remote_hit(key, raw, generation, probe)
        if outcome is None:
            outcome = yield from self.remote.miss(key, raw, probe)
        return outcome

    # lock-dc's parts, for the threaded strategy (strategies.lock.Lock runs them)
    def fill_or_wait(self, key: str, probe: Probe) -> Generator[Any, Any, Outcome]:
        return (yield from self.remote.fill_or_wait(key, probe))

    def present(self, key: str, probe: Probe) -> Generator[Any, Any, bool]:
        return (yield from self.remote.present(key, probe))

    def fill(self, key: str, probe: Probe) -> Generator[Any, Any, None]:
        yield from self.remote.fill(key, probe)
