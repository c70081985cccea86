"""Run every benchmark (``make bench``; ``python -m bench [N]``: N runs of benchmark 6, also
``STAMPEDE_BENCH_RUNS``); the last lines are benchmark 1's ratios, each the median of its rounds
with their range: the all-hit trial over the plain-socket GET loop (generator efficiency, with
metrics scraped and without) and over Locust's fastest configuration; then the same two with
the all-hit trial on asyncio clients (``--client-driver asyncio``: 25 coroutines on one event
loop a worker instead of 25 threads sharing its GIL), against the same floor and Locust runs.

Benchmarks print figures and the command to reproduce them; they assert nothing.
"""

from __future__ import annotations

import os
import platform
import sys

from bench import (
    ab_hit_path,
    aio_clients,
    cluster,
    gil_tax,
    ladder,
    recording,
    repeatability,
    report_rows,
    soak,
)
from bench import http as http_bench
from bench import simulate as simulate_bench


def main() -> None:
    try:
        runs = repeatability.runs_from(sys.argv[1:], os.environ)
    except repeatability.BadRuns as exc:
        print(f"python -m bench: error: {exc}", file=sys.stderr)
        sys.exit(2)
    print(f"machine: {platform.machine()}, {platform.python_implementation()} "
          f"{platform.python_version()}; reproduce with: make bench")
    recording.run()
    ab_hit_path.run()
    print(f"== report on {report_rows.ROWS:,} rows")
    report_rows.main()
    soak.run()
    repeatability.run(runs)
    http_bench.run()
    simulate_bench.run()
    aio_clients.run()
    gil_tax.run()
    ladder.run()
    with_metrics = cluster.run(metrics=True)
    figures = cluster.run()
    print(with_metrics.efficiency_line(" with metrics on (scraped each second)"))
    print(figures.efficiency_line())
    print(figures.vs_locust_line())
    if (on_asyncio := figures.on_asyncio()) is not None:
        print(on_asyncio.efficiency_line(" on asyncio clients"))
        print(on_asyncio.vs_locust_line(" on asyncio clients"))


if __name__ == "__main__":
    main()
