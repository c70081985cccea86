"""Shrink a measured run directory into a test fixture (tests/data/): every row that is not a
hit, one hit row in ``--keep-hits``; run.json and the trial, event and server tables as they are.

Why this is enough: ``simulate --from`` / ``--validate`` read the hits' median latency (a
sample keeps it) and every origin call (kept whole: the origin curve needs the calls in flight),
and the gated figures come from trials.parquet and expiries.parquet, which are copied unchanged.

    python scripts/prune_run.py RUN_DIR tests/data/NAME --keep-hits 100
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq


def prune(src: Path, dst: Path, keep_hits: int) -> None:
    """``dst`` (new) from ``src``: the small files copied, each trial's rows thinned."""
    dst.mkdir(parents=True)
    for path in src.iterdir():
        if path.is_file():
            shutil.copy2(path, dst / path.name)
    for part in sorted((src / "requests").glob("trial=*/*.parquet")):
        rows = pq.read_table(part)
        hit = pc.equal(rows["outcome"], "hit")
        hits = rows.filter(hit)
        sample = hits.take(pa.array(range(0, hits.num_rows, keep_hits), pa.int64()))
        out = dst / "requests" / part.parent.name
        out.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.concat_tables([rows.filter(pc.invert(hit)), sample]), out / part.name,
                       compression="zstd")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("src", type=Path)
    parser.add_argument("dst", type=Path)
    parser.add_argument("--keep-hits", type=int, default=100)
    args = parser.parse_args()
    prune(args.src, args.dst, args.keep_hits)


if __name__ == "__main__":
    main()
