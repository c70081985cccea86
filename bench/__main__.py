"""Run every benchmark in BENCHMARKS, in order; each module has ``main() -> None``."""

from __future__ import annotations

import importlib

BENCHMARKS = [
    "bench.report_10m",
]


def run() -> None:
    for name in BENCHMARKS:
        print(f"== {name}")
        importlib.import_module(name).main()


if __name__ == "__main__":
    run()
