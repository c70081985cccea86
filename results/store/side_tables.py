"""The side tables of a run directory: the servers' own records beside the request rows.

``expiries``, ``samples``, ``commands`` and ``statements`` are each keyed by the trial
(``TRIAL_KEY``) and follow ``schema``'s rule: columns are only ever added.
"""

from __future__ import annotations

import pyarrow as pa

from results.store.schema import TRIAL_KEY

# One row per event in ``expiries.parquet`` (results.figures.events): what the cache server reported,
# or the refresh cycle a refresh replaced, with its herd.
EXPIRY_SCHEMA = pa.schema(
    [
        *TRIAL_KEY,
        ("key", pa.string()),
        ("event_ns", pa.int64()),  # coordinator clock: the report, or its herd's first call if earlier
        ("scheduled_ns", pa.int64()),  # the planned instant it happened at; null where none
        ("source", pa.string()),  # expired, deleted, refresh or schedule
        ("in_window", pa.bool_()),
        ("calls", pa.int64()),  # origin calls attributed to it (its herd)
        ("first_call_ns", pa.int64()),
        ("last_end_ns", pa.int64()),
        ("duration_ms", pa.float64()),
        ("first_fill_ms", pa.float64()),
        ("reported_ns", pa.int64()),  # when the listener received the server's report
        ("waits", pa.int64()),  # client requests that waited for its fill (the calls' rule)
        ("calls_check", pa.int64()),  # black box: its herd by the second count (null: none)
    ]
)

# One row per sample in ``samples.parquet`` (a black-box trial, coordinator.blackbox): a count of
# the origin calls read during the trial, or a delete the tool made on the service's cache.
SAMPLE_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("trial", pa.int32()),
        ("source", pa.string()),  # pg_stat_statements, counter, or delete (a scheduled delete)
        ("t_ns", pa.int64()),  # coordinator clock: the read's midpoint (a delete: when it was sent)
        ("read_ns", pa.int64()),  # how long the read (or the delete) took
        ("value", pa.int64()),  # the count read, or the keys the delete removed
    ]
)

# One row per (trial, server, command) in ``commands.parquet``: what the servers counted over the
# trial (Redis INFO commandstats, memcached stats), as statements.parquet is for PostgreSQL.
COMMAND_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("trial", pa.int32()),
        ("server", pa.string()),  # cache, lock-store, or front (an HTTP cache before the app tier)
        ("kind", pa.string()),  # redis or memcached
        ("command", pa.string()),  # as the server names it (get, set, evalsha, client|setinfo...)
        ("calls", pa.int64()),
    ]
)

# One row per (trial, statement) in ``statements.parquet``: pg_stat_statements deltas over the
# trial, like experiment 003's per-query analysis of database time.
STATEMENT_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("trial", pa.int32()),
        ("queryid", pa.int64()),
        ("query", pa.string()),
        ("calls", pa.int64()),
        ("total_ms", pa.float64()),
        ("mean_ms", pa.float64()),
        ("share", pa.float64()),
        ("is_origin", pa.bool_()),
    ]
)
