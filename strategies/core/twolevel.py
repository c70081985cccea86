"""two-level as logic: an in-process copy per key (``local_ttl_ms``) in front of lock-dc.

The local layer is plain state of the core, shared by the process's requests: a hit on it is
a plain function (``local_hit``), a read from the cache stores a local copy only if no
invalidation arrived while it was in flight (the ``generation`` read before the GET), and the
fill publishes the key so that every process drops its copy. Who hears the publishes is not
logic: the threaded strategy runs a listener thread (``strategies.twolevel.Invalidations``)
that calls ``invalidate`` and ``outage``; the asyncio driver has no listener yet, which is why
two-level is still threaded only (``sans_io = False``).
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


class TwoLevelCore(LockCore):
    """lock-dc's logic behind the local layer; its fill also publishes the key."""

    def __init__(self, ttl: Ttl, clock: Clock, params: LockParams, local_ttl_ms: float) -> None:
        super().__init__(ttl, clock, params, double_check=True)
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
        """Someone rewrote ``key``: drop the local copy (the listener's call)."""
        self.generation += 1
        self.local.pop(key, None)

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
            outcome = yield from self.miss(key, raw, probe)
        return outcome

    def fill(self, key: str, probe: Probe) -> Generator[Any, Any, None]:
        value = yield Load(key)
        version.served(probe, value)
        sent = self.clock.wall_ns()
        expiry = self.ttl.draw(sent // 1_000_000)
        yield Pipeline(CACHE, (set_command(key, value, px=expiry.px, pxat=expiry.pxat),
                               ("PUBLISH", CHANNEL, key)))
        version.stored(probe, value, sent)
