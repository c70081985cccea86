"""Where the services are: URLs from the command line or the environment, masked when written."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from urllib.parse import urlsplit, urlunsplit

ENV = {
    "cache_url": "STAMPEDE_CACHE_URL",
    "lock_url": "STAMPEDE_LOCK_URL",
    "broker_url": "STAMPEDE_BROKER_URL",
    "origin_dsn": "STAMPEDE_ORIGIN_DSN",
}


@dataclass(frozen=True)
class Services:
    """The four services of an experiment. Workers read theirs from the environment."""

    cache_url: str
    lock_url: str
    broker_url: str
    origin_dsn: str

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Services:
        env = os.environ if environ is None else environ
        missing = [var for var in ENV.values() if not env.get(var)]
        if missing:
            raise KeyError(f"environment variables not set: {', '.join(missing)}")
        return cls(**{name: env[var] for name, var in ENV.items()})

    def to_env(self) -> dict[str, str]:
        return {ENV[f.name]: getattr(self, f.name) for f in fields(self)}

    def masked(self) -> dict[str, str]:
        return {f.name: mask_url(getattr(self, f.name)) for f in fields(self)}


def mask_url(url: str) -> str:
    """Replace the password in ``url`` with ``***`` (also a ``password=`` keyword)."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if parts.password is not None:
        user_info, _, host = netloc.rpartition("@")
        user = user_info.split(":", 1)[0]
        netloc = f"{user}:***@{host}"
    query = "&".join(
        "password=***" if item.lower().startswith("password=") else item
        for item in parts.query.split("&")
    ) if parts.query else parts.query
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
