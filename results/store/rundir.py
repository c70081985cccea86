"""The run directory: ``run.json``, ``requests/trial=N/`` (Hive-partitioned) and ``trials.parquet``.

Every completed trial is on disk before the next one starts, and an existing run is never
overwritten.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from results.store.schema import (
    MANIFEST_VERSION,
    REQUEST_SCHEMA,
    SCHEMA_VERSION,
    TRIAL_SCHEMA,
)
from results.store.side_tables import (
    COMMAND_SCHEMA,
    EXPIRY_SCHEMA,
    SAMPLE_SCHEMA,
    STATEMENT_SCHEMA,
)


class RunExists(FileExistsError):
    """The output directory already holds a run."""


class UnreadableRun(ValueError):
    """A run written by a newer version than this one reads (one line naming the version needed)."""


class RunWriter:
    def __init__(self, root: Path) -> None:
        self.root = root
        self._trials: list[dict[str, Any]] = []
        self._statements: list[dict[str, Any]] = []
        self._expiries: list[dict[str, Any]] = []
        self._commands: list[dict[str, Any]] = []
        self._samples: list[dict[str, Any]] = []

    @classmethod
    def create(cls, root: Path) -> RunWriter:
        """Make ``root`` (which must not exist yet, or be empty)."""
        if root.exists() and any(root.iterdir()):
            raise RunExists(f"{root} already exists and is not empty")
        root.mkdir(parents=True, exist_ok=True)
        (root / "requests").mkdir()
        return cls(root)

    def write_meta(self, meta: Mapping[str, Any]) -> None:
        """Write ``run.json`` atomically (temp file, then rename)."""
        data = {"schema_version": SCHEMA_VERSION, **meta}
        _atomic_write(self.root / "run.json", orjson.dumps(data, option=orjson.OPT_INDENT_2))

    def write_requests(self, trial: int, rows: pa.Table) -> Path:
        """One trial's rows at once (tests, benchmarks); a launch writes them as they arrive
        (``trial_parts``)."""
        parts = self.trial_parts(trial)
        parts.write(rows)
        parts.close()
        return parts.dir / "part-0.parquet"

    def trial_parts(self, trial: int) -> TrialParts:
        return TrialParts(self.root / "requests" / f"trial={trial}")

    def add_trial(self, row: Mapping[str, Any]) -> None:
        """Append one trial's summary (or replace it: rows that came late re-mark a trial) and
        rewrite ``trials.parquet`` at once."""
        self._trials = [t for t in self._trials if t["trial"] != row["trial"]] + [dict(row)]
        self._trials.sort(key=lambda t: int(t["trial"]))
        _replace_table(self.root / "trials.parquet", self._trials, TRIAL_SCHEMA)

    def add_statements(self, rows: list[dict[str, Any]]) -> None:
        """Append one trial's pg_stat_statements deltas and rewrite ``statements.parquet``."""
        self._statements.extend(rows)
        _replace_table(self.root / "statements.parquet", self._statements, STATEMENT_SCHEMA)

    def add_commands(self, rows: list[dict[str, Any]]) -> None:
        """Append one trial's server command counts and rewrite ``commands.parquet``."""
        self._commands.extend(rows)
        _replace_table(self.root / "commands.parquet", self._commands, COMMAND_SCHEMA)

    def add_expiries(self, rows: list[dict[str, Any]]) -> None:
        """One trial's events with their herds (replacing that trial's, if re-marked); rewrite
        ``expiries.parquet``."""
        trials = {r["trial"] for r in rows}
        self._expiries = [e for e in self._expiries if e["trial"] not in trials] + rows
        _replace_table(self.root / "expiries.parquet", self._expiries, EXPIRY_SCHEMA)

    def add_samples(self, rows: list[dict[str, Any]]) -> None:
        """One black-box trial's samples of the origin's count; rewrite ``samples.parquet``."""
        self._samples.extend(rows)
        _replace_table(self.root / "samples.parquet", self._samples, SAMPLE_SCHEMA)


class TrialParts:
    """One trial's partition of ``requests/``, written as batches arrive, a file per session of
    writes (``part-0.parquet``; rows that come after it was closed go to ``part-1.parquet`` ...),
    ``trial`` left to the directory name (Hive partitioning).

    Batches are gathered into row groups of about ``GROUP_ROWS``: a row group per batch (a
    client's 4,096 rows, a hundred a second at full rate) grew the file's footer, which the
    writer holds until it closes, by about 1 MB a second of a 10-minute trial."""

    COLUMNS: tuple[str, ...] = tuple(name for name in REQUEST_SCHEMA.names if name != "trial")
    GROUP_ROWS = 262_144  # rows per row group; at most this many wait in memory (~40 MB)

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self._writer: pq.ParquetWriter | None = None
        self._waiting: list[pa.Table] = []
        self._waiting_rows = 0
        self.rows = 0  # rows taken (written, or waiting for their row group until ``close``)

    def write(self, rows: pa.Table) -> None:
        self._waiting.append(rows.select(list(self.COLUMNS)))
        self._waiting_rows += rows.num_rows
        self.rows += rows.num_rows
        if self._waiting_rows >= self.GROUP_ROWS:
            self._flush()

    def _flush(self) -> None:
        if not self._waiting:
            return
        if self._writer is None:
            self.dir.mkdir(parents=True, exist_ok=True)
            number = len(list(self.dir.glob("part-*.parquet")))
            schema = pa.schema([REQUEST_SCHEMA.field(c) for c in self.COLUMNS])
            self._writer = pq.ParquetWriter(self.dir / f"part-{number}.parquet", schema,
                                            compression="zstd")
        group = pa.concat_tables(self._waiting)
        self._waiting, self._waiting_rows = [], 0
        self._writer.write_table(group, row_group_size=max(group.num_rows, 1))

    def close(self) -> None:
        """Write what waits and end the file (readers see the rows from here on)."""
        self._flush()
        if self._writer is not None:
            self._writer.close()
            self._writer = None


def _replace_table(path: Path, rows: list[dict[str, Any]], schema: pa.Schema) -> None:
    """Write ``rows`` beside ``path``, then rename over it: a reader never sees half a file."""
    tmp = path.with_suffix(".parquet.tmp")
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), tmp)
    os.replace(tmp, path)


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def read_meta(root: Path) -> dict[str, Any]:
    result: dict[str, Any] = orjson.loads((root / "run.json").read_bytes())
    return result


def check_readable(meta: Mapping[str, Any]) -> None:
    """UnreadableRun when run.json's schema or manifest is newer than this version reads; older
    runs (schema_version 1, no manifest) are read, their missing parts shown as such."""
    for key, newest in (("schema_version", SCHEMA_VERSION), ("manifest_version", MANIFEST_VERSION)):
        version = meta.get(key)
        if version is not None and (not isinstance(version, int) or version > newest):
            raise UnreadableRun(f"run.json has {key} {version}; this coordinator reads up to "
                                f"{newest} (upgrade stampede-lab to read it)")


def read_trials(root: Path) -> pa.Table:
    return pq.read_table(root / "trials.parquet")


def read_expiries(root: Path) -> pa.Table | None:
    """Every event with its herd; None for runs made before events were observed."""
    path = root / "expiries.parquet"
    return pq.read_table(path) if path.exists() else None


def read_commands(root: Path) -> pa.Table | None:
    """The servers' command counts per trial; None for runs made before they were asked."""
    path = root / "commands.parquet"
    return pq.read_table(path) if path.exists() else None


def read_statements(root: Path) -> pa.Table | None:
    """Per-statement database time per trial; None for runs made before it was recorded."""
    path = root / "statements.parquet"
    return pq.read_table(path) if path.exists() else None


def read_samples(root: Path) -> pa.Table | None:
    """A black-box run's samples of the origin's count; None for any other run."""
    path = root / "samples.parquet"
    return pq.read_table(path) if path.exists() else None


def requests_dataset(root: Path, dictionaries: bool = False) -> ds.Dataset:
    """All request rows; ``trial`` comes from the Hive partition directory names.
    ``dictionaries``: the string columns read dictionary-encoded (the scans' way: codes, not
    millions of Python strings)."""
    fmt: ds.FileFormat | str = "parquet"
    if dictionaries:
        fmt = ds.ParquetFileFormat(read_options=ds.ParquetReadOptions(
            dictionary_columns=set(DICTIONARY_COLUMNS)))
    return ds.dataset(root / "requests", format=fmt, partitioning="hive")


DICTIONARY_COLUMNS = ("run_id", "strategy", "worker", "key", "op", "outcome", "error")
