"""Run every benchmark (``make bench``); the last line is the generator efficiency (benchmark 1).

Benchmarks print figures and the command to reproduce them; they assert nothing.
"""

from __future__ import annotations

import platform

from bench import cluster, recording, report_10m


def main() -> None:
    print(f"machine: {platform.machine()}, {platform.python_implementation()} "
          f"{platform.python_version()}; reproduce with: make bench")
    recording.run()
    print("== report on 10 million rows")
    report_10m.main()
    with_metrics = cluster.run(metrics=True)
    efficiency = cluster.run()
    print(f"generator efficiency with metrics on (scraped each second): {with_metrics:.2f}")
    print(f"generator efficiency: {efficiency:.2f}")


if __name__ == "__main__":
    main()
