"""The private APIs the adapters lean on, each pinned below its library's next major version
(issue 31): an upgrade past the pin, or a pin moved without the adapter, fails here by name.

- meta-memcache ``CacheClient._get_or_lease`` (adapters/meta_memcache_lease.py): the one call
  that hands back the server's flags (win, stale, TTL left, CAS token) with the value.
- dogpile.cache ``CacheRegion._serialized_payload`` (adapters/dogpile_cache.py): how a primed
  value is stored with dogpile's own metadata (its creation time), as the region stores it.

- redis-py's hiredis parser (model/lean.py, the lean path): ``Connection._sock`` and
  ``_parser``, ``_HiredisParser._reader`` and ``_buffer``, and ``NOT_ENOUGH_DATA``, the reader's
  word for a reply not yet whole: a GET reads its reply off the reader itself; and
  ``Connection._connect``, which the lean path's kernel-timed connection extends (its socket's
  timeout set by the kernel, not by Python).

The asyncio adapters (adapters/aio) use only public APIs (cashews' middlewares and decorators,
aiocache's plugins, serializers and decorators), but they read each request's outcome from how
the library calls them: cashews' GET passing its miss sentinel as ``default=``, aiocache's
``post_get`` hook receiving ``ret=``, the order of the reads and lock attempts around our loader
(tests/integration/test_aio_libraries.py measures them). So each stays on the release line it was
written against (aiocache is 0.x: its minor is its major), checked here the same way.
"""

from __future__ import annotations

import importlib.metadata as md
import inspect
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Private:
    distribution: str
    owner: str  # module:Class
    name: str
    parameters: tuple[str, ...]  # the ones the adapter passes
    major: int  # the major version the adapter was written against


PRIVATE = [
    Private("meta-memcache", "meta_memcache.cache_client:CacheClient", "_get_or_lease",
            ("key", "lease_policy", "recache_policy", "lease_wait_fn"), 4),
    Private("dogpile.cache", "dogpile.cache.region:CacheRegion", "_serialized_payload",
            ("payload", "metadata"), 1),
]


# distribution, the release line the async adapter was written against, the next one
ASYNC_LINES = [("cashews", "7", "8"), ("aiocache", "0.12", "0.13")]


def extra_requirement(distribution: str, extra: str = "libraries") -> Requirement:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    found = [Requirement(r) for r in extras[extra]]
    return next(r for r in found if canonicalize_name(r.name) == canonicalize_name(distribution))


def constraint_pin(distribution: str) -> Version:
    text = (ROOT / "constraints.txt").read_text()
    pins = {canonicalize_name(n): v for n, v in re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)$", text,
                                                         flags=re.MULTILINE)}
    return Version(pins[canonicalize_name(distribution)])


@pytest.mark.parametrize("api", PRIVATE, ids=lambda a: f"{a.distribution}:{a.name}")
def test_pyproject_and_constraints_keep_the_library_below_its_next_major(api: Private) -> None:
    spec = extra_requirement(api.distribution).specifier
    nxt = Version(f"{api.major + 1}")
    assert any(s.operator == "<" and Version(s.version) <= nxt for s in spec), (
        f"{api.distribution} {spec}: the adapter uses {api.owner}.{api.name}; pin it below {nxt}")
    assert nxt not in spec and Version(f"{api.major}.99") in spec, spec
    pinned = constraint_pin(api.distribution)
    assert pinned in spec and pinned.major == api.major, (api.distribution, pinned, spec)


@pytest.mark.parametrize("api", PRIVATE, ids=lambda a: f"{a.distribution}:{a.name}")
def test_the_installed_library_has_the_private_api_the_adapter_calls(api: Private) -> None:
    installed = Version(md.version(api.distribution))
    assert installed.major == api.major, (
        f"{api.distribution} {installed} installed: the adapter was written against "
        f"{api.major}.x's {api.owner}.{api.name}; check it before moving the pin")
    module, cls = api.owner.split(":")
    owner = getattr(__import__(module, fromlist=[cls]), cls)
    method = getattr(owner, api.name, None)
    assert callable(method), f"{api.owner}.{api.name} is gone in {api.distribution} {installed}"
    names = list(inspect.signature(method).parameters)
    assert all(p in names for p in api.parameters), (api.name, names)


REDIS_MAJOR = 8  # the redis-py major model/lean.py was written against


def test_redis_py_stays_below_its_next_major_with_the_parser_the_lean_path_reads() -> None:
    from redis._parsers import hiredis as parsers
    from redis.connection import Connection

    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    spec = next(Requirement(r) for r in dependencies if Requirement(r).name == "redis").specifier
    assert Version(f"{REDIS_MAJOR + 1}") not in spec and Version(f"{REDIS_MAJOR}.99") in spec, spec
    assert Version(md.version("redis")).major == REDIS_MAJOR == constraint_pin("redis").major
    assert list(inspect.signature(Connection._connect).parameters) == ["self"]
    conn = Connection()
    assert conn._sock is None and isinstance(conn._parser, parsers._HiredisParser)
    parser = parsers._HiredisParser(65536)
    assert isinstance(parser._buffer, bytearray) and len(parser._buffer) == 65536
    parser.on_connect(conn)
    assert parser._reader.gets() is parsers.NOT_ENOUGH_DATA  # nothing fed yet


@pytest.mark.parametrize(("distribution", "line", "nxt"), ASYNC_LINES, ids=[a[0] for a in ASYNC_LINES])
def test_the_async_libraries_stay_on_their_release_line(distribution: str, line: str,
                                                       nxt: str) -> None:
    spec = extra_requirement(distribution, "async-libraries").specifier
    assert Version(nxt) not in spec and any(s.operator == "<" and Version(s.version) <= Version(nxt)
                                            for s in spec), (distribution, spec)
    for version in (constraint_pin(distribution), Version(md.version(distribution))):
        assert version in spec and version.release[:len(Version(line).release)] == \
            Version(line).release, (distribution, version, spec)
    dev = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["dev"]
    assert any("async-libraries" in r for r in dev), "make setup ([dev]) installs them"
