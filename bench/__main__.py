"""Run every benchmark (``make bench``); the last two lines are benchmark 1's ratios: the all-hit
trial over the plain-socket GET loop (generator efficiency) and over Locust's best.

Benchmarks print figures and the command to reproduce them; they assert nothing.
"""

from __future__ import annotations

import platform

from bench import cluster, recording, report_rows, soak


def main() -> None:
    print(f"machine: {platform.machine()}, {platform.python_implementation()} "
          f"{platform.python_version()}; reproduce with: make bench")
    recording.run()
    print(f"== report on {report_rows.ROWS:,} rows")
    report_rows.main()
    soak.run()
    with_metrics = cluster.run(metrics=True)
    figures = cluster.run()
    print(f"generator efficiency with metrics on (scraped each second): {with_metrics.efficiency:.2f}")
    print(f"generator efficiency: {figures.efficiency:.2f}")
    print(figures.vs_locust_line())


if __name__ == "__main__":
    main()
