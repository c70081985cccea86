"""Benchmark 10: what the model costs (issue 35): one replication of a world of app servers x
clients for a few expiries, per strategy, timed on this machine (closed loop, think 10 ms: the
larger world sends about 980,000 requests per simulated second).

    python -m bench.simulate                    # 100 and 1,000 app servers x 10 clients, scale
    python -m bench.simulate --size scale --strategies naive   # one named size, one strategy
    python -m bench.simulate --app-servers 10   # one size of your own
    make bench                                  # the three sizes, among the others

The scale size is issue 35's target: 1,000 app servers x 10 clients (about 980,000 requests per
simulated second) for 10 expiries of a 30 s TTL, about 310 million requests.

Prints, per strategy, the wall time, the simulated requests and their rate per wall second, the
simulated seconds, the origin calls per expiry and the largest herd the model found, the p50 and
p99 latency and the process's peak RSS. It asserts nothing.
"""

from __future__ import annotations

import argparse
import resource
import time
from dataclasses import dataclass

from simulate.metrics import figures
from simulate.world import WorldSpec, replicate


@dataclass(frozen=True)
class Size:
    app_servers: int
    clients: int
    expiries: int
    ttl_s: float
    think_ms: float


FULL = Size(100, 10, 3, 1.0, 10.0)
LARGE = Size(1000, 10, 3, 1.0, 10.0)  # about 980,000 requests per simulated second
SCALE = Size(1000, 10, 10, 30.0, 10.0)  # issue 35's target: under 5 min, peak RSS under 2 GB
TINY = Size(4, 5, 2, 0.2, 5.0)
STRATEGIES = ("naive", "lock-dc")
SIZES = {"full": FULL, "large": LARGE, "scale": SCALE, "tiny": TINY}


def timed(strategy: str, size: Size, seed: int = 1) -> str:
    """One replication of ``strategy`` at ``size``: its benchmark line."""
    spec = WorldSpec(strategy, size.app_servers, size.clients, size.ttl_s,
                     think_ms=size.think_ms, expiries=size.expiries)
    started = time.perf_counter()
    rec = replicate(spec, seed)
    wall = time.perf_counter() - started
    found = figures(rec, spec.expiries, spec.ttl_s / 2)
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return (f"[10] simulate {strategy}, {size.app_servers} app servers x {size.clients} clients, "
            f"{size.expiries} expiries of a {size.ttl_s:g} s TTL: {wall * 1000:,.1f} ms wall for "
            f"{found.requests:,} requests over {rec.seconds:.2f} simulated s "
            f"({found.requests / wall:,.0f} requests per wall s), origin {found.origin_per_expiry:,.1f}"
            f" per expiry, herd max {found.herd_max}, p50 {found.p50_ms:.3f} ms, p99 "
            f"{found.p99_ms:.3f} ms, peak RSS {rss_mb:,.0f} MB")


def run(*sizes: Size, strategies: tuple[str, ...] = STRATEGIES) -> list[str]:
    """Each strategy at each size (none given: ``FULL``, ``LARGE`` and ``SCALE``), one line
    each."""
    found = []
    for size in sizes or (FULL, LARGE, SCALE):
        for strategy in strategies:
            found.append(timed(strategy, size))
            print(found[-1], flush=True)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.simulate")
    parser.add_argument("--size", choices=sorted(SIZES), default=None, help="one named size")
    parser.add_argument("--app-servers", type=int, default=None, help="one size of your own")
    parser.add_argument("--clients", type=int, default=FULL.clients)
    parser.add_argument("--expiries", type=int, default=FULL.expiries)
    parser.add_argument("--strategies", default=",".join(STRATEGIES))
    args = parser.parse_args()
    strategies = tuple(args.strategies.split(","))
    if args.size is not None:
        run(SIZES[args.size], strategies=strategies)
    elif args.app_servers is None:
        run(strategies=strategies)
    else:
        run(Size(args.app_servers, args.clients, args.expiries, FULL.ttl_s, FULL.think_ms),
            strategies=strategies)


if __name__ == "__main__":
    main()
