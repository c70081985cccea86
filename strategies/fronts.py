"""HTTP caches in front of the app tier (nginx, Varnish) as the strategies of a trial.

No cache logic runs in a process here: the defence is the HTTP cache's own, configured from
these parameters by the stack that runs it (coordinator/stack/http_caches/), and the app tier
behind it serves every request that gets through straight from the origin (``Cache-Control:
max-age`` = the TTL). Registered so that ``--strategies nginx:lock=on`` parses, labels and
travels like any other spec; ``fetch`` is never called (a client reaches the cache over HTTP).

Both caches read the entry's TTL from the app's ``Cache-Control: max-age`` and key their
entries by the request URI; nothing here overrides either.
"""

from __future__ import annotations

import enum
import hashlib
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

from strategies.base import Deps, Outcome, Probe, StrategyError
from strategies.registry import register, strategy_class


class UseStale(enum.StrEnum):
    """nginx ``proxy_cache_use_stale``: when an expired entry may be served."""

    OFF = "off"  # never: every request that finds the entry expired goes upstream
    UPDATING = "updating"  # while one request refreshes the entry, the others get the old copy
    ERROR = "error"  # only when the upstream fails (error, timeout, 500/502/503/504)
    ERROR_UPDATING = "error+updating"  # both

    @property
    def directive_args(self) -> str:
        """The arguments of ``proxy_cache_use_stale`` for this choice."""
        return {UseStale.OFF: "off", UseStale.UPDATING: "updating",
                UseStale.ERROR: _ERRORS, UseStale.ERROR_UPDATING: f"{_ERRORS} updating"}[self]

    @property
    def updating(self) -> bool:
        return self in (UseStale.UPDATING, UseStale.ERROR_UPDATING)


_ERRORS = "error timeout http_500 http_502 http_503 http_504"


@dataclass(frozen=True)
class NginxParams:
    """nginx ``proxy_cache`` (1.22) and the directives that make it a stampede defence.

    - ``lock``: ``proxy_cache_lock``. Covers a *missing* entry only (ngx_http_file_cache.c
      reaches ``ngx_http_file_cache_lock`` only when no cached file exists): the first fill of a
      URI is coalesced, its waiters re-check every <= 500 ms (a timer, not a wake-up). At an
      *expired* entry every concurrent request still goes upstream unless ``use_stale`` has
      ``updating``.
    - ``use_stale``: ``proxy_cache_use_stale`` (see UseStale). With ``updating``, while one
      request refreshes an expired entry the others are answered from the old copy (status
      UPDATING); the refreshing request itself waits for the upstream (EXPIRED) unless
      ``background_update``.
    - ``background_update``: ``proxy_cache_background_update``: the request that finds the
      entry expired is answered stale at once (STALE) and a background subrequest refreshes it.
      nginx accepts it without ``use_stale`` updating but then never starts the subrequest
      (ngx_http_upstream.c requires updating, or a ``stale-while-revalidate`` from the
      upstream, which the app tier does not send): it would mean nothing, so it is refused.
    - ``lock_timeout_ms`` / ``lock_age_ms``: ``proxy_cache_lock_timeout`` (a waiter gives up
      and goes upstream, its response not cached) and ``proxy_cache_lock_age`` (a fill older
      than this lets one more request through); nginx's defaults, 5 s each. Only meaningful with
      ``lock``; allowed without it (nginx accepts them) so a grid can vary them.
    """

    lock: bool = False
    use_stale: UseStale = UseStale.OFF
    background_update: bool = False
    lock_timeout_ms: int = 5000
    lock_age_ms: int = 5000

    def __post_init__(self) -> None:
        object.__setattr__(self, "use_stale", _use_stale(self.use_stale))
        if self.background_update and not self.use_stale.updating:
            raise ValueError("background_update=on needs use_stale=updating (or error+updating): "
                             "nginx starts no background refresh otherwise")
        for name in ("lock_timeout_ms", "lock_age_ms"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a whole number of milliseconds >= 1, not {value!r}")


def _use_stale(value: object) -> UseStale:
    try:
        return UseStale(str(value))
    except ValueError:
        allowed = "|".join(m.value for m in UseStale)
        raise ValueError(f"use_stale must be one of {allowed}, not {value!r}") from None


@dataclass(frozen=True)
class VarnishParams:
    """Varnish 7.1 in front of the app tier.

    - ``grace_s``: ``beresp.grace`` set on every fetched object (Varnish's ``default_grace`` is
      10 s, the default here too). Within grace an expired object is served (a grace hit,
      ``MAIN.cache_hit_grace``) while one background fetch refreshes it. ``grace_s=0``: an
      expired object is a miss; the first request fetches, the others sleep on the object's
      waiting list (``MAIN.busy_sleep``) and are woken when it arrives (``MAIN.busy_wakeup``).
    - ``coalesce``: False defeats both with ``return (pass)`` in ``vcl_recv``: every request goes
      to the backend (the reference row: no cache at all).
    - ``ignore_busy``: ``req.hash_ignore_busy = true``: lookups skip the busy object, so there
      is no waiting list (the exact counterpart of nginx without its lock: objects are still
      cached, but every request at a miss goes to the backend). With grace a grace copy is still
      served, so its effect shows with ``grace_s=0``.
    """

    grace_s: float = 10.0
    coalesce: bool = True
    ignore_busy: bool = False

    def __post_init__(self) -> None:
        grace = self.grace_s
        if isinstance(grace, bool) or not isinstance(grace, int | float) or not 0 <= grace <= 86_400:
            raise ValueError(f"grace_s must be a number of seconds in [0, 86400], not {grace!r}")
        object.__setattr__(self, "grace_s", float(grace))
        if self.ignore_busy and not self.coalesce:
            raise ValueError("ignore_busy=on means nothing with coalesce=off (every request is "
                             "passed to the backend already)")


FrontParams = NginxParams | VarnishParams
# Spec name -> parameter class: ``nginx:lock=on`` parses into NginxParams(lock=True).
FRONTS: dict[str, type[NginxParams] | type[VarnishParams]] = {
    "nginx": NginxParams, "varnish": VarnishParams}


def front_name(params: FrontParams) -> str:
    return "nginx" if isinstance(params, NginxParams) else "varnish"


def as_dict(params: FrontParams) -> dict[str, Any]:
    """The parameters as JSON-ready values (enums as their text)."""
    return {k: (v.value if isinstance(v, enum.Enum) else v) for k, v in asdict(params).items()}


def config_id(params: FrontParams) -> str:
    """A short hash of the front and its parameters: what ``/stampede/config`` answers, so a
    reconfiguration is verified live rather than assumed."""
    text = front_name(params) + ":" + ",".join(f"{k}={v}" for k, v in sorted(as_dict(params).items()))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class _Front:
    """An HTTP cache's spec: its parameters; nothing to answer in-process."""

    name: ClassVar[str]
    front: ClassVar[bool] = True

    def __init__(self, deps: Deps, params: NginxParams | VarnishParams) -> None:
        self.params = params

    def fetch(self, key: str, probe: Probe) -> Outcome:
        raise StrategyError(f"{self.name} answers in front of the app tier, over HTTP")

    def prime(self, key: str, value: bytes, expire_at_ms: int) -> None:
        raise StrategyError(f"{self.name} is primed through its own HTTP front door")

    def on_write(self, key: str, probe: Probe) -> None:
        raise StrategyError(f"{self.name}: origin writes are not measured behind an HTTP cache")

    def cached_version(self, key: str) -> int | None:
        return None


@register
class Nginx(_Front):
    name: ClassVar[str] = "nginx"
    Params = NginxParams


@register
class Varnish(_Front):
    name: ClassVar[str] = "varnish"
    Params = VarnishParams


def is_front(name: str) -> bool:
    """The spec names an HTTP cache in front of the app tier (not in-process logic)."""
    return bool(getattr(strategy_class(name), "front", False))
