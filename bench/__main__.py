"""Run every benchmark (``make bench``; ``python -m bench [N]``: N runs of benchmark 6, also
``STAMPEDE_BENCH_RUNS``); the last two lines are benchmark 1's ratios: the all-hit trial over the
plain-socket GET loop (generator efficiency) and over Locust's best.

Benchmarks print figures and the command to reproduce them; they assert nothing.
"""

from __future__ import annotations

import os
import platform
import sys

from bench import cluster, recording, repeatability, report_rows, soak


def main() -> None:
    try:
        runs = repeatability.runs_from(sys.argv[1:], os.environ)
    except repeatability.BadRuns as exc:
        print(f"python -m bench: error: {exc}", file=sys.stderr)
        sys.exit(2)
    print(f"machine: {platform.machine()}, {platform.python_implementation()} "
          f"{platform.python_version()}; reproduce with: make bench")
    recording.run()
    print(f"== report on {report_rows.ROWS:,} rows")
    report_rows.main()
    soak.run()
    repeatability.run(runs)
    with_metrics = cluster.run(metrics=True)
    figures = cluster.run()
    print(f"generator efficiency with metrics on (scraped each second): {with_metrics.efficiency:.2f}")
    print(f"generator efficiency: {figures.efficiency:.2f}")
    print(figures.vs_locust_line())


if __name__ == "__main__":
    main()
