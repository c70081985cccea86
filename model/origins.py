"""Which loader an endpoint gets: the built-in statements, the user's statement, or an HTTP
service; and the PostgreSQL pool a process opens for them (none for an HTTP origin)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from psycopg_pool import ConnectionPool

from model.custom import CustomOrigin, OriginKind
from model.http.origin import HttpLoader
from model.origin import Committed, EndpointLoader, OriginShape
from model.services import WORKER_APP, make_pool
from model.sql_origin import SqlLoader
from model.workload import Endpoint
from strategies import Probe


class OriginLoader(Protocol):
    """A loader with the write path the origin writer uses (``--invalidate-rate``)."""

    def load(self, key: str, probe: Probe) -> bytes: ...

    def write(self, key: str) -> Committed: ...

    def confirm(self, key: str, version: int) -> None: ...


def loader_for(ep: Endpoint, origin: CustomOrigin, pool: ConnectionPool | None, shape: OriginShape,
               shaper: Callable[[bytes], bytes], size: int) -> OriginLoader:
    """The loader of ``ep``: its built-in query, the user's statement, or the HTTP service
    (``size`` connections, the same bound as the PostgreSQL pool's)."""
    if origin.kind is OriginKind.HTTP:
        return HttpLoader(origin, size, shaper)
    if pool is None:
        raise ValueError(f"endpoint {ep.name} needs a PostgreSQL origin (no origin DSN)")
    if origin.kind is OriginKind.SQL:
        return SqlLoader(pool, origin, shaper)
    return EndpointLoader(pool, ep.query, shape, shaper)


def origin_pool(dsn: str, origin: CustomOrigin, size: int, app_name: str = WORKER_APP,
                check: bool = False) -> ConnectionPool | None:
    """The origin pool of a process: none for an HTTP origin or a black-box service (its origin
    is its own); read-only sessions for the user's statement unless it may write
    (``--write-sql``, ``--allow-writes``)."""
    if origin.kind in (OriginKind.HTTP, OriginKind.SERVICE):
        return None
    return make_pool(dsn, size, app_name=app_name, check=check, read_only=origin.read_only)
