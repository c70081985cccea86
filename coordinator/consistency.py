"""The servers' own word on consistency at a trial's end, whatever the rows say.

For every key the trial wrote, the cache's version (read in the strategy's own format) is set
against the origin's. A cache behind the origin holds a proven stale set when its value will
outlive the newer version's commit by more than one value lifetime: a value written before that
commit expires within a lifetime of it, so this one was written after it. The server's remaining
TTL (PTTL) and PostgreSQL's age of the commit say so at once; nothing waits.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from coordinator.connect import pg_connect
from model.workload import Endpoint
from results.figures.metrics import is_write
from strategies import Deps, StrategySpec, close_strategy

# key_writes.committed_at is re-dated after each write's cache step (model.origin.CONFIRM_SQL):
# never earlier than the commit. The margin covers only PTTL's millisecond rounding.
MARGIN_S = 0.001
CachedVersion = Callable[[str], int | None]
TtlLeft = Callable[[str], int]  # PTTL in ms: -1 no expiry, -2 no key

_HISTORY = ("SELECT version, extract(epoch FROM clock_timestamp() - committed_at)::float8"
            " FROM key_writes WHERE key = %s ORDER BY version")


@dataclass(frozen=True)
class EndCheck:
    """Written keys whose cache is behind the origin at the end, and those proven stale sets."""

    behind: int
    stale_sets: int
    detail: tuple[str, ...] = ()  # one line per behind key, for run.json and the console

    def columns(self) -> dict[str, int]:
        return {"end_behind_keys": self.behind, "end_stale_sets": self.stale_sets}


def lifetime_s(spec: StrategySpec, ttl_ms: int) -> float:
    """The longest a value written before a commit can stay in the cache: its TTL, spread by
    jitter, times swr's hard factor (its envelope outlives the soft TTL)."""
    jitter = float(spec.params.get("jitter", 0.0))
    hard = float(spec.params.get("hard_factor", 1.0))
    return ttl_ms / 1000 * (1.0 + jitter) * hard


def end_check(keys: Iterable[str], cached: Mapping[str, CachedVersion], ttl_left_ms: TtlLeft,
              dsn: str, lifetime: Mapping[str, float]) -> EndCheck:
    """Check each written key (``cached`` and ``lifetime`` by key), proving stale sets."""
    behind, proven, detail = 0, 0, []
    with pg_connect(dsn, autocommit=True) as conn:
        for key in sorted(keys):
            history = conn.execute(_HISTORY, (key,)).fetchall()  # first: its ages only grow
            have = cached[key](key)
            if not history or have is None or have >= history[-1][0]:
                continue
            left_ms = ttl_left_ms(key)  # last: it only shrinks, so the proof errs on the safe side
            newer_age_s = next(age for version, age in history if version > have)
            outlives_s = newer_age_s + (left_ms / 1000 if left_ms >= 0 else float("inf"))
            stale_set = left_ms != -2 and outlives_s > lifetime[key] + MARGIN_S
            behind += 1
            proven += stale_set
            detail.append(f"{key}: cache v{have}, origin v{history[-1][0]}, "
                          + ("a stale set (it outlives the newer commit by "
                             f"{outlives_s:.2f} s, a value's lifetime is {lifetime[key]:g} s)"
                             if stale_set else "not proven a stale set (it may predate the "
                             "newer commit)"))
    return EndCheck(behind, proven, tuple(detail))


def written_keys(rows: pa.Table) -> set[str]:
    """Keys whose origin write committed in this trial (the rows' word, the check's input)."""
    committed = rows.filter(pc.and_(is_write(rows), pc.greater(rows["commit_ns"], 0)))
    return {str(k) for k in pc.unique(committed["key"]).to_pylist()}


def servers_check(spec: StrategySpec, endpoints: Sequence[Endpoint], deps: Callable[[Endpoint], Deps],
                  ttl_left_ms: TtlLeft, dsn: str, keys: set[str]) -> EndCheck:
    """Build the trial's strategy per endpoint (to read its format) and check ``keys``."""
    if not keys:
        return EndCheck(0, 0)
    by_prefix = {ep.query.value: ep for ep in endpoints}
    named = {key: ep for ep in endpoints for key in ep.key_list}  # the user's keys (--keys-sql)
    built = {ep.name: spec.build(deps(ep)) for ep in endpoints}
    try:
        owner = {key: named.get(key) or by_prefix[key.rsplit(":", 1)[0]] for key in keys}
        return end_check(keys, {k: built[ep.name].cached_version for k, ep in owner.items()},
                         ttl_left_ms, dsn,
                         {k: lifetime_s(spec, ep.ttl_ms) for k, ep in owner.items()})
    finally:
        for strategy in built.values():
            close_strategy(strategy)
