"""What a strategy's logic asks its driver to do: small immutable requests, answered in kind.

A strategy's request logic (``strategies.core``) is a generator that yields these and receives
each one's result, the h11 way: it never touches a socket, a clock, a thread or an event. The
sync driver (``strategies.drivers.sync``) executes them on ``Commands`` in the client's thread,
the asyncio driver (``strategies.drivers.aio``) on async commands with ``await``, and a test on a
scripted store under a scripted scheduler. So the algorithm exists once, and three worlds run it.

Effects are NamedTuples: built in about 100 ns, dispatched on their type. Reading a clock is not
an effect but a ``strategies.base.Clock`` the logic is built with (``Deps.clock``): a yield
costs a generator round trip, a clock read is synchronous in every world, and a simulated clock
is injected the same way.

A command that fails is thrown back into the logic at its yield (the redis-py exception, which
redis.asyncio raises too), so the logic's own ``try`` decides what a failure means.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any, NamedTuple, Protocol

from strategies.base import Outcome, Probe
from strategies.commands import Arg, Command

CACHE = 0  # the store an effect goes to: the cache server
LOCKS = 1  # the lock store


class Get(NamedTuple):
    """``GET key`` -> bytes | None."""

    store: int
    key: str


class Set(NamedTuple):
    """``SET key value [PX | PXAT] [NX]`` -> bool (stored)."""

    store: int
    key: str
    value: bytes
    px: int | None = None
    pxat: int | None = None
    nx: bool = False


class Delete(NamedTuple):
    """``DEL keys...`` -> int."""

    store: int
    keys: tuple[str, ...]


class Rpush(NamedTuple):
    """``RPUSH key value`` -> int."""

    store: int
    key: str
    value: bytes


class Blpop(NamedTuple):
    """``BLPOP key timeout`` -> bytes | None (None: nothing within ``timeout_s``)."""

    store: int
    key: str
    timeout_s: float


class Pipeline(NamedTuple):
    """Several commands in one round trip -> None (the first error reply raises)."""

    store: int
    commands: tuple[Command, ...]
    transaction: bool = False


class Eval(NamedTuple):
    """A Lua script (by its source; the driver registers it once) -> its reply."""

    store: int
    source: str
    keys: tuple[str, ...]
    args: tuple[Arg, ...]


class Sleep(NamedTuple):
    """Pause this request ``seconds`` (a poll interval) -> None."""

    seconds: float


class Load(NamedTuple):
    """Compute ``key``'s value at the origin, measured into the request's probe -> bytes."""

    key: str


class LocalFlight:
    """One key's in-process flight (local-lock): its leader's answer for the followers, and
    ``waiter``, whatever the driver parks them on (a ``threading.Event``, an ``asyncio.Event``,
    a simpy event): the logic sets ``done`` and never looks at ``waiter``."""

    __slots__ = ("done", "error", "version", "waiter")

    def __init__(self) -> None:
        self.done = False
        self.error: BaseException | None = None
        self.version = -1  # what the leader served: the followers serve the same value
        self.waiter: Any = None


class AwaitFlight(NamedTuple):
    """Park this request until ``flight.done`` or ``timeout_s`` -> None (the logic reads
    ``flight.done`` after: the driver's own wake-up is never its answer)."""

    flight: LocalFlight
    timeout_s: float


class EndFlight(NamedTuple):
    """``flight`` is done (set by the logic before): wake the requests parked on it -> None."""

    flight: LocalFlight


Effect = (Get | Set | Delete | Rpush | Blpop | Pipeline | Eval | Sleep | Load | AwaitFlight
          | EndFlight)
# A request's logic: yields effects, receives their results, returns its answer.
Steps = Generator[Any, Any, Any]
JobSteps = Callable[[Probe], Generator[Any, Any, Outcome]]


class Submit(NamedTuple):
    """Run ``job`` off the request path, as its own row -> bool: False when the driver has no
    background executor (the logic then runs the job inline, counted in this request)."""

    key: str
    job: JobSteps


class Subscriber(Protocol):
    """A core that hears a pub/sub channel of the cache (two-level's invalidations): not an
    effect but a standing subscription, so its listener is the driver's (a thread, a task, the
    simulated store's delivery), started with the strategy and closed with it."""

    channel: str

    def heard(self, data: bytes | str) -> None:
        """One message on ``channel``."""

    def outage(self) -> None:
        """The subscription was lost (the cache failed): messages may have been missed."""


def subscriber(core: Any) -> Subscriber | None:
    """``core`` (or the core a wrapper holds as ``inner``) if it subscribes to a channel."""
    while core is not None:
        if isinstance(getattr(core, "channel", None), str):
            return core  # type: ignore[no-any-return]
        core = getattr(core, "inner", None)
    return None
