"""The contract between the coordinator and the app tier (``app/``), both ways.

An app process (one of the tier's N granian workers) serves every trial of a run: the trial is
named in each request's path (``/t/<run_id>/<trial>/<key>``), so one app tier serves them all, and an HTTP
cache in front (nginx, Varnish) keeps each trial's entries apart by their URLs. What a trial
is (strategy, TTL, workload, where its rows go) the app reads from the broker, where the
coordinator publishes it before the trial:

- ``stampede:alive:app@<host>:<pid>``: the app process's beat (worker.heartbeat, a process of
  its own), and ``stampede:app:info:<node>``: its threads and clock offset, set when it starts.
- ``stampede:app:current``: the trial being served, ``<run_id>:<trial>``; its spec under
  ``stampede:app:spec:<run_id>:<trial>`` (``AppTrialSpec`` JSON).
- ``stampede:app:ready:<run_id>:<trial>``: the set of app processes that built the trial.
- ``stampede:app:finish:<run_id>:<trial>``: set by the coordinator once every client is done;
  each app process then ships the rest of its rows and its end marker to the trial's stream.

A request's answer carries what the app did in response headers (``Header``): the clients'
rows keep today's columns (outcome, lock wait, stale age, version) while the origin calls are
counted from the app's own rows (op ``app``), so a call whose response reaches no client (an
HTTP cache's background update) is still counted, and none twice.
"""

from __future__ import annotations

import enum
import re
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import redis

from model.wire import InvalidTaskArguments, TrialSpec

# An app process's settings (granian's, app/__main__.py), as the stack, the compose file
# and the Kubernetes manifests set them.
APP_ENV = {"processes": "STAMPEDE_APP_PROCESSES", "threads": "STAMPEDE_APP_THREADS",
           "bind": "STAMPEDE_APP_BIND", "kind": "STAMPEDE_APP_KIND"}
# What an app process is (--app-kind): granian's WSGI threads (app/wsgi.py), or uvicorn's one
# event loop per process (app/asgi.py).
APP_KINDS = ("wsgi", "asgi")
APP_NODE_PREFIX = "app@"  # an app process's node name: app@<host>:<pid>
CURRENT_KEY = "stampede:app:current"
TRIAL_PREFIX = "/t/"  # /t/<run_id>/<trial>/<key>
FLOOR_PATH = "/stampede/floor"  # 204 at once: the physical floor of a request to the tier
HEALTH_PATH = "/stampede/health"
_TRIAL_PATH = re.compile(r"^/t/([A-Za-z0-9._-]{1,80})/(\d{1,7})/(.+)$")
KEY_TTL_MS = 3_600_000  # the trial's keys outlive it by an hour, then go
CLOCK_ROUNDS = 15


class Header(enum.StrEnum):
    """The app's response headers (request headers: ``PRIME``)."""

    OUTCOME = "X-Stampede-Outcome"  # hit | stale | filled | waited
    LOCK_WAIT_NS = "X-Stampede-Lock-Wait-Ns"
    STALE_AGE_NS = "X-Stampede-Stale-Age-Ns"
    LOCAL_HIT = "X-Stampede-Local-Hit"  # 1: from the app process's in-process cache
    VERSION = "X-Stampede-Version"  # the origin version served (-1: none)
    FALLBACK = "X-Stampede-Fallback"  # 1: the cache failed, the origin answered
    ERROR = "X-Stampede-Error"  # a failed request's error text (status 500)
    APP = "X-Stampede-App"  # which app process answered
    # Request header: the coordinator's priming through an HTTP cache, not a client's request
    # (its origin call is made before the trial's count starts, like every priming's).
    PRIME = "X-Stampede-Prime"


def app_node(host: str, pid: int) -> str:
    return f"{APP_NODE_PREFIX}{host}:{pid}"


def info_key(node: str) -> str:
    return f"stampede:app:info:{node}"


def spec_key(run_id: str, trial: int) -> str:
    return f"stampede:app:spec:{run_id}:{trial}"


def ready_key(run_id: str, trial: int) -> str:
    return f"stampede:app:ready:{run_id}:{trial}"


def finish_key(run_id: str, trial: int) -> str:
    return f"stampede:app:finish:{run_id}:{trial}"


def current_value(run_id: str, trial: int) -> str:
    return f"{run_id}:{trial}"


def trial_path(run_id: str, trial: int) -> str:
    """The path prefix of a trial's requests; the key follows it."""
    return f"{TRIAL_PREFIX}{run_id}/{trial}/"


def parse_path(path: str) -> tuple[str, int, str] | None:
    """``(run_id, trial, key)`` of a trial request's path; None for any other path."""
    found = _TRIAL_PATH.match(path)
    if found is None:
        return None
    return found.group(1), int(found.group(2)), found.group(3)


@dataclass(frozen=True)
class AppTrialSpec:
    """One trial as the app tier serves it: the workers' spec (strategy, TTL, workload,
    where the rows go), each app process's sender number on the trial's stream, and whether
    an HTTP cache stands in front (then the app serves from the origin, with ``max-age``).

    ``senders`` maps an app node to its number on the trial's stream (after the workers'): a
    process that started after the trial was published has none and answers 503."""

    trial: TrialSpec
    senders: dict[str, int]
    front: str = ""  # "": no HTTP cache; nginx | varnish: the app serves straight from the origin
    threads: int = 1  # each process's request threads: its connections are sized for them
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["trial"] = self.trial.to_json()
        return data

    @classmethod
    def from_json(cls, data: object) -> AppTrialSpec:
        """Validated like a worker's task argument: this is input from the network."""
        if not isinstance(data, Mapping) or not {"trial", "senders"} <= set(data):
            raise InvalidTaskArguments("app trial spec must be an object with trial and senders")
        unknown = set(data) - {"trial", "senders", "front", "threads", "extra"}
        if unknown:
            raise InvalidTaskArguments(f"app trial spec: unknown fields {', '.join(sorted(unknown))}")
        senders, front, threads = data["senders"], data.get("front", ""), data.get("threads", 1)
        if not isinstance(senders, Mapping) or not all(
                isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 10**4
                for k, v in senders.items()):
            raise InvalidTaskArguments("app trial spec: senders must map node names to numbers")
        if front not in ("", "nginx", "varnish"):
            raise InvalidTaskArguments(f"app trial spec: front {front!r} is not nginx|varnish|''")
        if not isinstance(threads, int) or isinstance(threads, bool) or not 1 <= threads <= 10_000:
            raise InvalidTaskArguments("app trial spec: threads must be an int in [1, 10000]")
        extra = data.get("extra", {})
        if not isinstance(extra, Mapping):
            raise InvalidTaskArguments("app trial spec: extra must be an object")
        return cls(TrialSpec.from_json(data["trial"]), dict(senders), str(front), threads,
                   dict(extra))


def senders_after(workers: int, nodes: list[str]) -> dict[str, int]:
    """Sender numbers of the app processes on a trial's stream, after the workers' own."""
    return {node: workers + i for i, node in enumerate(sorted(nodes))}


def broker_offset(client: redis.Redis, rounds: int = CLOCK_ROUNDS) -> dict[str, int]:
    """This host's clock against the broker's (``TIME``): theirs minus ours, NTP's rule."""
    samples = []
    for _ in range(rounds):
        sent = time.time_ns()
        seconds, micros = client.time()
        back = time.time_ns()
        samples.append((back - sent, seconds * 10**9 + micros * 1000 - (sent + back) // 2))
    rtt, offset = min(samples)
    return {"offset_ns": offset, "uncertainty_ns": rtt // 2}
