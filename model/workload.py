"""What the clients ask for, and when: key sets, endpoints, stages, bypass, arrival rate.

A ``Workload`` is a pure, JSON-serialisable value shared by every trial of a run; the
coordinator builds it from options and each worker turns it into precomputed tables
(``worker.schedule``) so the request loop does a few list lookups per request, nothing more.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from model.custom import CustomOrigin, InvalidOrigin
from model.think import InvalidThink, ThinkKind, ThinkTime
from model.trace import InvalidTrace, Trace

MAX_KEYS = 1_000_000
MAX_STAGES = 64
PRIME_LIMIT = 10_000  # a single endpoint with more keys starts cold (priming costs a query each)
MAX_KEY_LIST = 100_000  # keys named by the user (--keys-sql, --keys-file): they travel in each task


class InvalidWorkload(ValueError):
    """A workload option or task field out of range (one line naming it)."""


class KeyKind(enum.StrEnum):
    HOT = "hot"  # one key, every client
    MANY = "many"  # K keys, uniform popularity (experiment 001: primed to expire together)
    ZIPF = "zipf"  # K keys, Zipf popularity with exponent s


class Query(enum.StrEnum):
    """Origin queries an endpoint can run (model.origin holds the SQL)."""

    ORDERS = "orders"  # range aggregate over orders (experiment 000)
    PRODUCT = "product"  # primary-key product lookup (experiment 003, light)
    RANKING = "ranking"  # top 10 of a category by sales, full scan (experiment 003, heavy)
    SQL = "sql"  # the user's own statement (--origin-sql; model.custom)
    HTTP = "http"  # the user's own HTTP service (--origin-url; model.custom)


@dataclass(frozen=True)
class KeySet:
    kind: KeyKind = KeyKind.HOT
    count: int = 1
    exponent: float = 0.0

    def __post_init__(self) -> None:
        if not 1 <= self.count <= MAX_KEYS:
            raise InvalidWorkload(f"key count {self.count} is outside [1, {MAX_KEYS:,}]")
        if self.kind is KeyKind.HOT and self.count != 1:
            raise InvalidWorkload("a hot key set has exactly one key")
        if self.kind is KeyKind.ZIPF and not 0 < self.exponent <= 5:
            raise InvalidWorkload(f"zipf exponent {self.exponent} is outside (0, 5]")

    @classmethod
    def parse(cls, text: str) -> KeySet:
        """``hot``, ``many:K`` or ``zipf:K:S`` (``zipf:K,S`` is accepted too)."""
        parts = text.strip().replace(",", ":").split(":")
        try:
            kind = KeyKind(parts[0])
            if kind is KeyKind.HOT and len(parts) == 1:
                return cls()
            if kind is KeyKind.MANY and len(parts) == 2:
                return cls(kind, int(parts[1]))
            if kind is KeyKind.ZIPF and len(parts) == 3:
                return cls(kind, int(parts[1]), float(parts[2]))
        except ValueError as exc:
            if isinstance(exc, InvalidWorkload):
                raise
        raise InvalidWorkload(f"{text!r} is not hot, many:K or zipf:K:S (e.g. zipf:1000:1.1)")

    @property
    def label(self) -> str:
        if self.kind is KeyKind.HOT:
            return "hot"
        if self.kind is KeyKind.MANY:
            return f"many:{self.count}"
        return f"zipf:{self.count}:{self.exponent:g}"


@dataclass(frozen=True)
class Endpoint:
    """One API of the application under test: its origin query, cache TTL, share and keys."""

    name: str
    query: Query
    keys: KeySet
    ttl_ms: int
    weight: float = 1.0
    prime: bool = True  # prime every key before the trial (few keys); False: start cold
    # The user's keys (--keys-sql, --keys-file), hottest first: the key set takes its first
    # ``keys.count``. Empty: the built-in names ``query:0`` .. ``query:K-1``.
    key_list: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if len(self.key_list) > MAX_KEY_LIST or len(self.key_list) < (self.keys.count
                                                                        if self.key_list else 0):
            raise InvalidWorkload(f"endpoint {self.name}: {len(self.key_list):,} keys named for "
                                  f"a key set of {self.keys.count:,} (at most {MAX_KEY_LIST:,})")
        if not all(isinstance(k, str) and 0 < len(k) <= 200 for k in self.key_list):
            raise InvalidWorkload(f"endpoint {self.name}: keys are strings of 1 to 200 characters")
        if not self.name.isidentifier() or len(self.name) > 32:
            raise InvalidWorkload(f"endpoint name {self.name!r} is not a short identifier")
        if not 1 <= self.ttl_ms <= 24 * 3600 * 1000:
            raise InvalidWorkload(f"endpoint {self.name}: ttl_ms {self.ttl_ms} out of range")
        if not 0 < self.weight <= 1e6:
            raise InvalidWorkload(f"endpoint {self.name}: weight {self.weight} must be > 0")

    def key_names(self) -> list[str]:
        """``product:0`` .. ``product:K-1``: the key's number selects the origin row or window;
        the user's keys as they named them."""
        if self.key_list:
            return list(self.key_list[: self.keys.count])
        return [f"{self.query.value}:{i}" for i in range(self.keys.count)]


@dataclass(frozen=True)
class Workload:
    endpoints: tuple[Endpoint, ...]
    rates: tuple[float, ...] = ()  # open loop, total requests/s per stage; empty: closed loop
    bypass: tuple[float, ...] = (0.0,)  # fraction of requests sent straight to the origin, per stage
    stage_s: float = 0.0  # length of each stage; 0: one stage spanning the whole window
    think_ms: float = 0.0  # closed loop: pause after each request
    value_bytes: int = 0  # pad each cached value to this size; 0: the query's own result
    compress: bool = False  # zlib-compress the (padded) value before caching it
    invalidate_rate: float = 0.0  # writes per second that update a row and delete its key
    late_ms: float = 10.0  # open loop: a send this late counts as late
    drop_ms: float = 1000.0  # open loop: a send this late is dropped (an error row)
    seed: int = 1
    origin: CustomOrigin = field(default_factory=CustomOrigin)  # the user's own origin, if any
    think: ThinkTime = field(default_factory=ThinkTime)  # --think (none: think_ms, constant)
    trace: Trace | None = None  # --keys-trace: replayed open loop (model.trace)
    names: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "names", tuple(e.name for e in self.endpoints))
        self.check()

    @property
    def pause(self) -> ThinkTime | None:
        """The closed loop's think time: ``--think``, else ``--think-ms`` (constant); None: none."""
        if not self.think.none:
            return self.think
        return ThinkTime(ThinkKind.CONSTANT, self.think_ms) if self.think_ms > 0 else None

    @property
    def open_loop(self) -> bool:
        return bool(self.rates) or self.trace is not None

    @property
    def stages(self) -> int:
        return max(len(self.rates), len(self.bypass), 1)

    def rate_at(self, stage: int) -> float:
        return _broadcast(self.rates, stage)

    def bypass_at(self, stage: int) -> float:
        return _broadcast(self.bypass, stage)

    def check(self) -> None:
        if not 1 <= len(self.endpoints) <= 16:
            raise InvalidWorkload("a workload has 1 to 16 endpoints")
        if len(set(self.names)) != len(self.names):
            raise InvalidWorkload(f"endpoint names repeat: {', '.join(self.names)}")
        _check_list("--rate", self.rates, 0.1, 1e6)
        _check_list("--bypass", self.bypass, 0.0, 1.0)
        lengths = {len(v) for v in (self.rates, self.bypass) if len(v) > 1}
        if len(lengths) > 1:
            raise InvalidWorkload("--rate and --bypass list different numbers of stages")
        if self.stages > MAX_STAGES:
            raise InvalidWorkload(f"at most {MAX_STAGES} stages")
        if self.stages > 1 and self.stage_s <= 0:
            raise InvalidWorkload("several stages need --stage-seconds")
        _check("--stage-seconds", self.stage_s, 0, 3600)
        _check("--think-ms", self.think_ms, 0, 60_000)
        if self.think_ms > 0 and not self.think.none:
            raise InvalidWorkload("give --think or --think-ms, not both")
        if self.trace is not None:
            self._check_trace(self.trace)

    def _check_trace(self, trace: Trace) -> None:
        """A trace is the one endpoint's whole traffic, in one stage."""
        if len(self.endpoints) != 1 or self.stages != 1 or self.rates or self.invalidate_rate:
            raise InvalidWorkload("--keys-trace replays one endpoint in one stage: no --mix shop, "
                                  "--rate list, --bypass list, --stage-seconds or --invalidate-rate")
        keys = len(self.endpoints[0].key_names())
        if max(trace.codes) >= keys or min(trace.codes) < 0:
            raise InvalidWorkload(f"the trace names key {max(trace.codes)} of {keys}")
        _check("--value-bytes", self.value_bytes, 0, 64 * 2**20)
        _check("--invalidate-rate", self.invalidate_rate, 0, 10_000)
        _check("late_ms", self.late_ms, 0.1, 60_000)
        _check("drop_ms", self.drop_ms, self.late_ms, 600_000)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("names")
        data["origin"] = self.origin.to_json()
        data["think"] = {**data["think"], "kind": self.think.kind.value}
        if self.trace is not None:  # compact: codes and offsets as lists
            data["trace"] = {"codes": list(self.trace.codes),
                             "offsets_us": list(self.trace.offsets_us),
                             "speed": self.trace.speed, "rate": self.trace.rate}
        return data

    @classmethod
    def from_json(cls, data: object) -> Workload:
        """Rebuild from a task message; anything malformed raises InvalidWorkload."""
        if not isinstance(data, Mapping):
            raise InvalidWorkload("workload must be an object")
        try:
            endpoints = tuple(_endpoint(e) for e in data["endpoints"])
            scalars = {k: v for k, v in data.items() if k != "endpoints"}
            for name in ("rates", "bypass"):
                if name in scalars:
                    scalars[name] = tuple(float(v) for v in scalars[name])
            return cls(endpoints=endpoints, **_own(scalars))
        except InvalidOrigin as exc:
            raise InvalidWorkload(f"{exc.option}: {exc}") from None
        except (InvalidThink, InvalidTrace) as exc:
            raise InvalidWorkload(str(exc)) from None
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, InvalidWorkload):
                raise
            raise InvalidWorkload(f"malformed workload: {type(exc).__name__}: {exc}") from None


def _own(scalars: dict[str, Any]) -> dict[str, Any]:
    """The user's origin, think time and trace rebuilt (absent from runs before issue 27)."""
    scalars["origin"] = CustomOrigin.from_json(scalars.get("origin"))
    trace = scalars.get("trace")
    scalars["trace"] = None if trace is None else Trace(
        tuple(int(c) for c in trace["codes"]), tuple(int(o) for o in trace["offsets_us"]),
        float(trace["speed"]), float(trace["rate"]))
    think = scalars.get("think") or {}
    scalars["think"] = ThinkTime(ThinkKind(think.get("kind", "constant")),
                                 float(think.get("low_ms", 0)), float(think.get("high_ms", 0)))
    return scalars


def _endpoint(data: Mapping[str, Any]) -> Endpoint:
    keys = data["keys"]
    return Endpoint(
        name=str(data["name"]), query=Query(data["query"]),
        keys=KeySet(KeyKind(keys["kind"]), int(keys["count"]), float(keys["exponent"])),
        ttl_ms=int(data["ttl_ms"]), weight=float(data["weight"]), prime=bool(data["prime"]),
        key_list=tuple(data.get("key_list") or ()),
    )


def _broadcast(values: tuple[float, ...], stage: int) -> float:
    if not values:
        return 0.0
    return values[stage] if len(values) > 1 else values[0]


def _check(name: str, value: float, low: float, high: float) -> None:
    if not (low <= value <= high) or math.isnan(value):
        raise InvalidWorkload(f"{name} {value:g} is outside [{low:g}, {high:g}]")


def _check_list(name: str, values: tuple[float, ...], low: float, high: float) -> None:
    for value in values:
        _check(name, value, low, high)


def single(query: Query, keys: KeySet, ttl_ms: int) -> tuple[Endpoint, ...]:
    """One endpoint, all traffic (experiments 000, 001, 004)."""
    return (Endpoint(query.value, query, keys, ttl_ms, prime=keys.count <= PRIME_LIMIT),)


def shop(products: KeySet, categories: int, ttl_ms: int) -> tuple[Endpoint, ...]:
    """Experiment 003's mix: 97 % light product lookups (cold cache), 3 % heavy rankings.

    003 used TTLs of 10 min (product) and 5 min (ranking): the ranking TTL is half the product's.
    """
    return (
        Endpoint("product", Query.PRODUCT, products, ttl_ms, weight=97, prime=False),
        Endpoint("ranking", Query.RANKING, KeySet(KeyKind.MANY, categories), max(1, ttl_ms // 2),
                 weight=3, prime=True),
    )
