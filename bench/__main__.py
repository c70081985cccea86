"""Run every benchmark; the last line is the generator efficiency (benchmark 1)."""

from __future__ import annotations

import platform
import sys

from bench import cluster, recording


def main() -> None:
    print(f"machine: {platform.machine()}, {platform.python_implementation()} "
          f"{platform.python_version()}; reproduce with: make bench")
    recording.run()
    efficiency = cluster.run()
    print(f"generator efficiency: {efficiency:.2f}")


if __name__ == "__main__":
    main()
    sys.exit(0)
