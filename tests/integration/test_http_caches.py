"""nginx 1.22 and Varnish 7.1, really started, in front of a real origin (gunicorn serving
tests/http_cache_origin.py: 200 ms per /items request, ``Cache-Control: max-age=1``, its own
record of every arrival): what each configuration lets through at a missing and at an expired
entry, counted by the origin itself and cross-checked against X-Cache-Status and the servers'
own counters.

Each configuration runs CLIENTS closed-loop threads on one fresh URL for SECONDS: nginx counts a
max-age in whole seconds (an entry refilled just after a second boundary lives until the second
boundary after next), so its expiries come every 2 s and SECONDS holds at least two of them;
Varnish's come every ~1.2 s (the TTL after each fill). The first herd is the first fill (a
missing entry), every later herd one expiry. One nginx and one Varnish serve the whole module:
every test reconfigures them with ``apply`` (an empty cache, verified live).
"""

from __future__ import annotations

import statistics
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import strategies
from coordinator.app_tier.fronts import RemoteFront
from coordinator.app_tier.trials import PrimeFailed
from coordinator.stack.http_caches import (
    NGINX_COUNTERS,
    VARNISH_COUNTERS,
    FrontParams,
    NginxFront,
    NginxParams,
    UseStale,
    VarnishFront,
    VarnishParams,
    config_id,
    deltas,
    start_front,
    varnish_origin_requests,
)
from coordinator.stack.http_caches.params import spec_label
from coordinator.stack.processes import StackError
from tests.helpers import ROOT
from tests.http_cache_load import Reply, arrivals, get, hammer, herds, missing_servers, statuses
from tests.http_service import start_service

CLIENTS = 16
# At least two expiries each: nginx's come every 2 s (whole seconds), Varnish's every ~1.2 s
# (the TTL after each 200 ms fill).
SECONDS = {"nginx": 4.5, "varnish": 3.6}
DRAIN_S = 0.3  # a background refresh started by the last requests reaches the origin
HERD = CLIENTS // 2  # "a herd": at least half the clients reached the origin at one expiry

Front = NginxFront | VarnishFront
pytestmark = pytest.mark.skipif(missing_servers() is not None, reason=str(missing_servers()))


@pytest.fixture(scope="module")
def origin(service_dir: Path) -> Iterator[str]:
    proc, base = start_service(service_dir, ROOT, "tests.http_cache_origin:app", "/count")
    yield base
    proc.stop()


@pytest.fixture(scope="module")
def nginx(origin: str) -> Iterator[NginxFront]:
    front = start_front(NginxParams(), [origin.removeprefix("http://")])
    assert isinstance(front, NginxFront)
    yield front
    front.stop()


@pytest.fixture(scope="module")
def varnish(origin: str) -> Iterator[VarnishFront]:
    front = start_front(VarnishParams(), [origin.removeprefix("http://")])
    assert isinstance(front, VarnishFront)
    yield front
    front.stop()


@dataclass(frozen=True)
class Run:
    replies: list[Reply]
    herds: list[list[float]]  # the origin's arrivals, grouped; [0] is the first fill
    counters: dict[str, int]  # the front's own counters, this run's deltas

    @property
    def expiry_herds(self) -> list[int]:
        return [len(h) for h in self.herds[1:]]

    @property
    def origin_calls(self) -> int:
        return sum(len(h) for h in self.herds)

    def say(self, label: str) -> None:
        print(f"{label}: {len(self.replies)} requests, first fill {len(self.herds[0])} origin "
              f"calls, per expiry {self.expiry_herds}, statuses {dict(statuses(self.replies))}, "
              f"counters {self.counters}")


def run(front: Front, params: FrontParams, origin: str, expiries: bool = True,
        seconds: float | None = None) -> Run:
    """Apply ``params``, load one fresh URL, read what the origin and the front counted."""
    front.apply(params)  # type: ignore[arg-type]
    assert front.live_config()["id"] == config_id(params)
    key = f"{front.kind}-{uuid.uuid4().hex[:8]}"
    names = NGINX_COUNTERS if isinstance(front, NginxFront) else VARNISH_COUNTERS
    before = front.counters()
    seconds = seconds or SECONDS[front.kind]
    replies = hammer(front.url, f"/items/{key}", CLIENTS, seconds)
    time.sleep(DRAIN_S)
    found = Run(replies, herds(arrivals(origin, key)), deltas(before, front.counters(), names))
    found.say(spec_label(params))
    assert not expiries or len(found.herds) >= 3, f"< 2 expiries in {seconds} s: {found.expiry_herds}"
    return found


def first_replies(replies: list[Reply]) -> list[Reply]:
    """Each client's first reply: the burst released at one instant on the missing entry."""
    first: dict[int, Reply] = {}
    for reply in replies:
        first.setdefault(reply.client, reply)
    return list(first.values())


# --- nginx ----------------------------------------------------------------------------------


def upstream_calls_by_status(replies: list[Reply], background: bool) -> int:
    """What X-Cache-Status says went upstream: each MISS and EXPIRED reply, and with
    background_update each STALE one (it started one background refresh)."""
    seen = statuses(replies)
    return seen["MISS"] + seen["EXPIRED"] + (seen["STALE"] if background else 0)


def test_nginx_without_lock_every_client_reaches_the_origin_at_every_expiry(
        nginx: NginxFront, origin: str) -> None:
    found = run(nginx, NginxParams(), origin)
    assert len(found.herds[0]) >= HERD  # the first fill: nothing coalesced
    assert min(found.expiry_herds) >= HERD, found.expiry_herds
    assert upstream_calls_by_status(found.replies, False) == found.origin_calls
    assert found.counters["requests"] >= len(found.replies)


def test_nginx_lock_coalesces_the_first_fill_but_not_an_expiry(nginx: NginxFront, origin: str) -> None:
    """The finding: proxy_cache_lock covers a missing entry only. Its waiters re-check on a
    500 ms timer (ngx_http_file_cache_lock_wait), so at the first fill they wait >= 0.45 s for
    a 200 ms fill; at every expiry the entry exists (expired), the lock is never taken, and the
    herd is back."""
    found = run(nginx, NginxParams(lock=True), origin)
    assert len(found.herds[0]) == 1
    waiters = sorted(r.latency_s for r in first_replies(found.replies) if r.cache == "HIT")
    print(f"nginx lock: first-fill waiters' latency min {waiters[0]:.3f} s, median "
          f"{statistics.median(waiters):.3f} s")
    assert len(waiters) >= CLIENTS - 2 and waiters[0] >= 0.45, waiters
    assert min(found.expiry_herds) >= HERD, found.expiry_herds
    assert upstream_calls_by_status(found.replies, False) == found.origin_calls


@pytest.mark.parametrize("background", [True, False], ids=["background_update", "no_background"])
def test_nginx_use_stale_updating_lets_one_request_through_per_expiry(
        nginx: NginxFront, origin: str, background: bool) -> None:
    params = NginxParams(lock=True, use_stale=UseStale.UPDATING, background_update=background)
    found = run(nginx, params, origin)
    assert len(found.herds[0]) == 1  # the lock
    assert found.expiry_herds == [1] * len(found.expiry_herds)
    seen = statuses(found.replies)
    assert seen["UPDATING"] > 0  # the others were answered from the old copy
    assert seen["STALE" if background else "EXPIRED"] == len(found.expiry_herds)
    assert upstream_calls_by_status(found.replies, background) == found.origin_calls


def test_nginx_answers_floor_config_and_status_itself(nginx: NginxFront, origin: str) -> None:
    params = NginxParams(lock=True, lock_timeout_ms=2500)
    nginx.apply(params)
    before = nginx.counters()
    assert nginx.live_config() == {"front": "nginx", "id": config_id(params),
                                   "generation": nginx.generation,
                                   "params": {"lock": True, "use_stale": "off",
                                              "background_update": False,
                                              "lock_timeout_ms": 2500, "lock_age_ms": 5000}}
    assert get(nginx.url, "/stampede/floor") == (204, "", b"")
    key = uuid.uuid4().hex[:8]
    assert get(nginx.url, f"/items/{key}")[1] == "MISS"
    assert get(nginx.url, f"/items/{key}")[1] == "HIT"
    nginx.apply(params)  # the same parameters again: a new generation with an empty cache
    assert nginx.live_config()["generation"] == nginx.generation
    assert get(nginx.url, f"/items/{key}")[1] == "MISS"
    assert len(arrivals(origin, key)) == 2
    change = deltas(before, nginx.counters(), NGINX_COUNTERS)  # kept across the reload
    assert change["requests"] >= 5


def test_a_configuration_nginx_refuses_leaves_the_running_one(nginx: NginxFront) -> None:
    """An upstream that does not resolve (the app tier's name before its Service exists):
    ``nginx -t`` refuses it, apply raises with nginx's line, and nothing live changed."""
    nginx.apply(NginxParams(lock=True))
    live, upstreams = nginx.live_config(), nginx.upstreams
    nginx.upstreams = ("no-such-host.invalid:80",)
    try:
        with pytest.raises(StackError, match="host not found in upstream"):
            nginx.apply(NginxParams())
    finally:
        nginx.upstreams = upstreams
    assert nginx.live_config() == live and nginx.params == NginxParams(lock=True)
    running = (nginx.area / "nginx.conf").read_text()  # what the next reload would read
    assert config_id(NginxParams(lock=True)) in running and "no-such-host" not in running
    assert get(nginx.url, "/stampede/floor")[0] == 204


# --- Varnish --------------------------------------------------------------------------------


def test_varnish_default_one_backend_request_per_expiry_from_grace(
        varnish: VarnishFront, origin: str) -> None:
    found = run(varnish, VarnishParams(), origin)
    assert len(found.herds[0]) == 1  # the first fill: the waiting list
    assert found.expiry_herds == [1] * len(found.expiry_herds)
    assert varnish_origin_requests(found.counters) == found.origin_calls
    assert found.counters["MAIN.cache_hit_grace"] > 0
    assert statuses(found.replies)["grace"] == found.counters["MAIN.cache_hit_grace"]


def test_varnish_without_grace_the_waiting_list_still_coalesces(
        varnish: VarnishFront, origin: str) -> None:
    found = run(varnish, VarnishParams(grace_s=0), origin)
    assert found.expiry_herds == [1] * len(found.expiry_herds)
    assert varnish_origin_requests(found.counters) == found.origin_calls
    assert found.counters["MAIN.cache_hit_grace"] == 0
    assert found.counters["MAIN.busy_sleep"] > 0
    assert found.counters["MAIN.busy_wakeup"] == found.counters["MAIN.busy_sleep"]
    waiters = [r.latency_s for r in first_replies(found.replies) if r.cache == "hit"]
    print(f"varnish grace 0: first-fill waiters' latency median {statistics.median(waiters):.3f} s")


def test_varnish_with_coalescing_defeated_the_herd_is_back(varnish: VarnishFront, origin: str) -> None:
    """``req.hash_ignore_busy`` (no waiting list) without grace: Varnish's counterpart of nginx
    without its lock."""
    found = run(varnish, VarnishParams(grace_s=0, ignore_busy=True), origin)
    assert len(found.herds[0]) >= HERD
    assert min(found.expiry_herds) >= HERD, found.expiry_herds
    assert varnish_origin_requests(found.counters) == found.origin_calls
    assert found.counters["MAIN.busy_sleep"] == 0


def test_varnish_pass_sends_every_request_to_the_origin(varnish: VarnishFront, origin: str) -> None:
    """``return (pass)``: the reference row, no cache at all (no herds: one continuous stream)."""
    found = run(varnish, VarnishParams(coalesce=False), origin, expiries=False, seconds=1.5)
    assert found.origin_calls == len(found.replies) == varnish_origin_requests(found.counters)
    assert set(statuses(found.replies)) == {"pass"}


def test_varnish_answers_floor_and_config_itself(varnish: VarnishFront, origin: str) -> None:
    params = VarnishParams(grace_s=2.5)
    varnish.apply(params)
    before = varnish.counters()
    assert varnish.live_config()["params"] == {"grace_s": 2.5, "coalesce": True, "ignore_busy": False}
    assert get(varnish.url, "/stampede/floor") == (204, "", b"")
    key = uuid.uuid4().hex[:8]
    assert [get(varnish.url, f"/items/{key}")[1] for _ in range(2)] == ["miss", "hit"]
    varnish.apply(params)  # a new generation: every object banned
    assert get(varnish.url, f"/items/{key}")[1] == "miss"
    assert len(arrivals(origin, key)) == 2
    change = deltas(before, varnish.counters(), VARNISH_COUNTERS)  # kept across vcl.use
    assert varnish_origin_requests(change) == 2 and change["MAIN.cache_hit"] == 1


# --- a deployment's front, as the coordinator finds it (coordinator.app_tier.fronts) ----------

def test_a_remote_front_is_checked_never_changed(nginx: NginxFront) -> None:
    """The coordinator takes a deployed front's live configuration for what it is: the trial's
    spec must be it (else one line naming both); nothing is reloaded."""
    nginx.apply(NginxParams(lock=True))
    generation = nginx.generation
    remote = RemoteFront("nginx", nginx.url)
    assert remote.open(strategies.parse("nginx:lock=on")) == nginx.url
    with pytest.raises(PrimeFailed, match=r"runs configuration .* needs"):
        remote.open(strategies.parse("nginx:lock=on,use_stale=updating"))
    assert nginx.live_config()["generation"] == generation  # checked, not reconfigured
