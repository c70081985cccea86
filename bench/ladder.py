"""Benchmark 13: where the generator's efficiency goes, one piece of the product at a time.

Benchmark 1 gives the all-hit trial's rate over the plain-socket floor's, and a breakdown of
each stage timed alone on one thread. On 8 processes x 25 threads sharing 2 cores the stages
cost several times that (benchmark 12), so this measures the contended price itself: the
floor loop with the product's pieces added one by one, each rung cumulative, on 8 processes
x 25 threads, rounds alternating, against a Redis GET (benchmark 1's floor) and an HTTP GET of
a static nginx endpoint (benchmark 8's):

- ``floor``: the plain-socket loop (worker.baseline: ``socket_loop``, ``http_socket_loop``);
- ``+ row``: the same exchange (its own socket per thread) as the fetch of the product's
  closed loop and request wrapper (worker.loop.closed_loop, requester: clocks, probe, try),
  each request a packed row in a Recorder drained at its bound (worker.recorder);
- ``+ shipping``: a Shipper thread (worker.shipper) draining the recorders every 0.5 s into
  one Arrow batch, zstd, XADD on the Redis server, as a trial's does;
- ``+ self-check``: the loop-lag sampler thread (worker.selfcheck) beside them;
- ``+ fetch``: the product's own fetch instead of the floor's exchange: naive's hit on the
  lean path (model.lean), or the HTTP client (worker.http_fetch: httptools, the response's
  meaning). What is left between this and a trial is Celery's task, the heartbeat and the
  metrics fold.

Each rung's rate over the floor's (same round) is what a generator with that much of the
product in its loop can reach here; the CPU per request is every process's, over the requests.

    python -m bench.ladder           # about 4 minutes; part of `make bench`
"""

from __future__ import annotations

import enum
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import hiredis
import redis

import strategies
from bench import forked
from bench.nginx_static import start_nginx
from bench.stages import VALUE, Unused, all_hit_context
from coordinator.stack.redis_server import start_redis
from model.http.request import RequestBytes
from model.http.target import HttpTarget
from model.services import RedisPath, redis_commands
from strategies import Deps, Outcome, Probe
from worker.baseline import Loop, http_socket_loop, response_length, socket_loop
from worker.http_fetch import HttpFetch
from worker.loop import Fetch, closed_loop
from worker.recorder import Recorder
from worker.selfcheck import GeneratorMonitor
from worker.shipper import FULL_ROWS, Shipper

KEY = "stampede:bench:ladder"
SHIP_INTERVAL_S = 0.5  # a trial's (model.wire.TrialSpec.progress_interval_s)


class Rung(enum.Enum):
    FLOOR = "floor"
    ROW = "+ row"
    SHIPPING = "+ shipping"
    SELF_CHECK = "+ self-check"
    FETCH = "+ fetch"


class Over(enum.Enum):
    """What the loops ask: a Redis GET (the product's fetch: naive on the lean path) or an HTTP
    GET of a static nginx endpoint (the product's fetch: its HTTP client)."""

    REDIS = "redis"
    HTTP = "http"


@dataclass(frozen=True)
class Size:
    processes: int = 8
    threads: int = 25
    seconds: float = 4.0
    rounds: int = 5  # this VM's rate moves by 20 % between rounds: the median of five ratios
    over: tuple[Over, ...] = tuple(Over)


FULL, TINY = Size(), Size(processes=2, threads=2, seconds=0.3, rounds=1)


@dataclass(frozen=True)
class Place:
    """Where one measurement's loops go: the Redis server (always: the shipper's stream is on
    it) and, over HTTP, the static target."""

    redis_url: str
    http: HttpTarget | None = None


def _exchange_fetch(connect: Callable[[], Callable[[], object]], outcome: Outcome) -> Fetch:
    """A floor's exchange as a fetch: ``connect()`` (on a thread's first call) gives that
    thread's exchange; every call runs it and answers ``outcome``."""
    mine = threading.local()

    def fetch(key: str, probe: Probe) -> Outcome:
        try:
            exchange = mine.exchange
        except AttributeError:
            exchange = mine.exchange = connect()
        exchange()
        return outcome

    return fetch


def _open(host: str | None, port: int) -> socket.socket:
    sock = socket.create_connection((host or "127.0.0.1", port), 2.0)
    sock.settimeout(None)  # blocking, as the floors'
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def redis_exchange(url: str) -> Callable[[], object]:
    """The Redis floor's GET on a socket of its own: worker.baseline.socket_loop's body, which
    the floor keeps inline (a call per request would lower the floor itself)."""
    parts = urlsplit(url)
    sock, reader = _open(parts.hostname, parts.port or 6379), hiredis.Reader()
    packed: bytes = hiredis.pack_command(("GET", KEY))  # type: ignore[arg-type]
    send, recv, feed, gets = sock.sendall, sock.recv, reader.feed, reader.gets

    def exchange() -> object:
        send(packed)
        while (reply := gets()) is False:
            feed(recv(65536))
        return reply
    return exchange


def http_exchange(target: HttpTarget) -> Callable[[], object]:
    """The HTTP floor's GET on a socket of its own: worker.baseline.http_socket_loop's body,
    kept inline there as the Redis floor's is."""
    sock, request = _open(target.host, target.port), RequestBytes(target)(KEY)
    length = response_length(sock, request)
    send, recv = sock.sendall, sock.recv

    def exchange() -> object:
        send(request)
        got = 0
        while got < length:
            if not (chunk := recv(65536)):
                raise ConnectionError("the server closed the connection")
            got += len(chunk)
        return got
    return exchange


def floor_loop(place: Place) -> Loop:
    if place.http is not None:
        return http_socket_loop(place.http, KEY)
    return socket_loop(place.redis_url, KEY)


def floor_fetch(place: Place) -> Fetch:
    if place.http is not None:
        target = place.http
        return _exchange_fetch(lambda: http_exchange(target), Outcome.ANSWERED)
    return _exchange_fetch(lambda: redis_exchange(place.redis_url), Outcome.HIT)


def product_fetch(place: Place, threads: int) -> Fetch:
    """The product's own fetch, as a trial's client threads have it (worker.build)."""
    if place.http is not None:
        return HttpFetch(place.http)
    commands = redis_commands(RedisPath.LEAN, place.redis_url, threads)
    return strategies.parse("naive").build(Deps(commands, commands, Unused(), 600_000)).fetch


def _product_process(place: Place, rung: Rung, index: int, threads: int, start_ns: int,
                     end_ns: int) -> int:
    """``threads`` closed loops of the product with the pieces of ``rung`` and those below."""
    order = list(Rung)
    has = set(order[:order.index(rung) + 1])
    fetch = product_fetch(place, threads) if Rung.FETCH in has else floor_fetch(place)
    ctx = all_hit_context(fetch, KEY, end_ns, start_ns)
    recorders = [Recorder(i, [KEY]) for i in range(threads)]
    broker, stream = redis.Redis.from_url(place.redis_url), f"{KEY}:rows:{index}"
    shipper = Shipper(broker, stream, index, SHIP_INTERVAL_S) if Rung.SHIPPING in has else None
    if shipper is not None:
        shipper.watch(recorders)
        shipper.start()
    else:
        for rec in recorders:
            rec.bound(FULL_ROWS, _dropped)
    monitor = GeneratorMonitor().start() if Rung.SELF_CHECK in has else None
    gate, stop = threading.Event(), threading.Event()
    gate.set()
    try:
        forked.join([threading.Thread(target=closed_loop, args=(ctx, rec, gate, stop))
                     for rec in recorders])
        rows = sum(len(rec) for rec in recorders)
        if monitor is not None:
            monitor.stop()
        if shipper is not None and (shipped := shipper.finish()).rows != rows:
            raise RuntimeError(f"benchmark 13 shipped {shipped.rows} of {rows} rows "
                               f"({shipped.dropped_rows} dropped)")
        if errors := sum(rec.errors for rec in recorders):
            raise RuntimeError(f"benchmark 13: {errors} of {rows} requests failed at {rung.value}")
    finally:
        broker.delete(stream)
        broker.close()
    return rows


def _dropped(rec: Recorder) -> None:
    """Below the shipping rung a full buffer is drained and its rows dropped (counted by len)."""
    rec.drain()


def _count(place: Place, rung: Rung, threads: int) -> forked.Count:
    def count(index: int, start_ns: int, end_ns: int) -> int:
        if rung is Rung.FLOOR:
            return forked.in_threads(threads, floor_loop(place), start_ns, end_ns)
        return _product_process(place, rung, index, threads, start_ns, end_ns)
    return count


@contextmanager
def places(over: tuple[Over, ...]) -> Iterator[dict[Over, Place]]:
    """A Redis server holding the value (and the shipper's streams), and nginx for HTTP."""
    workdir = Path(tempfile.mkdtemp(prefix="ladder-"))
    proc, url = start_redis("ladder", workdir)
    nginx = start_nginx(workers=2) if Over.HTTP in over else None
    try:
        redis.Redis.from_url(url).set(KEY, VALUE)
        found = {Over.REDIS: Place(url)}
        if nginx is not None:
            found[Over.HTTP] = Place(url, HttpTarget("http", "127.0.0.1", nginx.port, "/k/{key}"))
        yield {o: found[o] for o in over}
    finally:
        if nginx is not None:
            nginx.stop()
        proc.stop()
        shutil.rmtree(workdir, ignore_errors=True)


Found = dict[Over, dict[Rung, list[tuple[float, float]]]]


def warm(redis_url: str) -> None:
    """One batch shipped by a Shipper before the processes fork (pyarrow's compute functions
    and zstd codec load on first use): a trial's worker has them from its first trial on, and a
    rung's processes would otherwise pay them inside the measurement."""
    rec, broker, stream = Recorder(0, [KEY]), redis.Redis.from_url(redis_url), f"{KEY}:warm"
    try:
        rec.add(0, time.time_ns(), 1000, Outcome.HIT, Probe(), None)
        shipper = Shipper(broker, stream, 0)
        shipper.watch([rec])
        shipper.ship()
    finally:
        broker.delete(stream)
        broker.close()


def measure(size: Size = FULL) -> Found:
    """Over -> rung -> each round's (rps, CPU us per request), rounds alternating."""
    found: Found = {o: {rung: [] for rung in Rung} for o in size.over}
    with places(size.over) as where:
        warm(where[size.over[0]].redis_url)
        for _ in range(size.rounds):
            for o, place in where.items():
                for rung in Rung:
                    count = _count(place, rung, size.threads)
                    found[o][rung].append(forked.measure_once(
                        count, size.processes, size.seconds, f"benchmark 13 ({rung.value})"))
    return found


FETCHES = {Over.REDIS: "naive's hit on the lean path", Over.HTTP: "the HTTP client"}


def run(size: Size = FULL) -> Found:
    found = measure(size)
    print(f"[13] the product's pieces added to the plain-socket floor one by one (each rung "
          f"cumulative), {size.processes} processes x {size.threads} threads, {size.seconds:g} s "
          f"per measurement, {size.rounds} rounds alternating")
    for over, rungs in found.items():
        print(f"    {over.value} (+ fetch: {FETCHES[over]}):")
        forked.print_rates({rung.value: rounds for rung, rounds in rungs.items()},
                           Rung.FLOOR.value, "      ", 14, "client CPU")
    return found


if __name__ == "__main__":
    run()
