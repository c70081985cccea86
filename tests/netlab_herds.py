"""Herd sizes with distance between the workers and the cache, measured on the namespace lab.

    sudo .venv/bin/python -m tests.netlab_herds --delay-ms 0,0.5 --out runs/netlab

Builds the lab of tests/e2e/test_netfaults.py (every process in a namespace of its own; each
worker reaches the cache through its link on the router), then runs one ``coordinator launch``
per delay with ``--fault net:delay:wN-cache=MS`` on every worker's link (0 too: the same relay
path either way), and prints each run's table. Needs root, ``ip netns`` and nftables.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

from tests.helpers import coordinator
from tests.netlab_links import start_router, start_services, start_workers
from tests.netns_lab import Lab, netns_available


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--delay-ms", default="0,0.5", help="one-way delays to compare")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("runs/netlab"))
    parser.add_argument("launch", nargs="*", default=[
        "--clients", "40", "--strategies", "naive,lock", "--ttl", "1", "--seconds", "10",
        "--repeat", "3", "--scale", "200000"], help="launch options (after --)")
    args = parser.parse_args()
    reason = netns_available()
    if reason:
        print(f"cannot build the lab: {reason}", file=sys.stderr)
        return 2
    workdir = Path(tempfile.mkdtemp(prefix="slherd-"))
    workdir.chmod(0o755)
    names = tuple(f"w{i + 1}" for i in range(args.workers))
    net = Lab()
    try:
        net.open()
        services = start_services(net, workdir)
        control, urls = start_router(net, workdir, names)
        start_workers(net, workdir, services, urls)
        coord, _ = net.host("coord")
        env = {**os.environ, **services.to_env(), "STAMPEDE_NET_CONTROL": control}
        for index, delay in enumerate(args.delay_ms.split(",")):
            out = (args.out / f"delay-{delay}ms").resolve()
            faults = [a for n in names for a in ("--fault", f"net:delay:{n}-cache={delay}")]
            seed = ["--seed"] if index == 0 else ["--no-seed"]
            done = coordinator("launch", "--workers", str(len(names)), *seed, *args.launch,
                               *faults, "--out", str(out), "--worker-timeout", "30",
                               timeout=3600, env=env, prefix=net.run_in(coord))
            print(f"== one-way delay {delay} ms between each worker and the cache -> {out}")
            print(done.stdout[-6000:], done.stderr[-2000:], sep="\n")
            if done.returncode != 0:
                return done.returncode
    finally:
        net.close()
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
