"""The Parquet schema: the single source of truth for writer, reader, report and docs. The
request rows and the trials are here; the servers' side tables are in ``side_tables``.

Columns are only ever added. Renaming or removing one is a breaking change: bump
SCHEMA_VERSION, which ``run.json`` records.
"""

from __future__ import annotations

import pyarrow as pa

from model.http.response import CACHE_STATUS_WORDS
from strategies.base import Outcome

SCHEMA_VERSION = 1
# run.json's manifest (command line, resolved options, seeds, versions, hosts): its fields are only
# ever added; a rename or removal bumps this. Runs before manifests have none (and no version).
MANIFEST_VERSION = 1

# What a worker sends back: one row per request, times on the worker's own clock.
_WIRE_BASE = pa.schema(
    [
        ("client", pa.int32()),
        ("key", pa.string()),
        ("op", pa.string()),
        ("t_intended_ns", pa.int64()),
        ("t_start_ns", pa.int64()),
        ("latency_ns", pa.int64()),
        ("outcome", pa.string()),
        ("origin_called", pa.int8()),
        ("origin_start_ns", pa.int64()),
        ("origin_ns", pa.int64()),
        ("pool_wait_ns", pa.int64()),
        ("lock_wait_ns", pa.int64()),
        ("stale_age_ns", pa.int64()),
        ("error", pa.string()),
        ("local_hit", pa.int8()),  # 1: answered from the worker's in-process cache (two-level)
    ]
)
# Columns added after the first schema, appended after ``in_window`` in REQUEST_SCHEMA so the
# earlier columns keep their places: the stage of a staged run (-1: warm-up), whether the
# request bypassed the cache on purpose (the bypass ramp of experiment 003), and, for a refresh
# of a value that had not expired yet (XFetch early, swr), that value's expiry stamp as its
# filler wrote it (0: none): it names the refresh cycle the origin call belongs to.
# Versions (consistency under writes): the origin version of the value a row answered with (a
# write row: the version it committed; -1: none), the version the row wrote into the cache (-1:
# none) and when that cache write was sent (0: none), and a write row's commit instant (0: none).
WIRE_ADDED = [pa.field("stage", pa.int16()), pa.field("bypass", pa.bool_()),
              pa.field("refresh_of_ns", pa.int64()),
              pa.field("version_served", pa.int64()), pa.field("version_set", pa.int64()),
              pa.field("set_ns", pa.int64()), pa.field("commit_ns", pa.int64()),
              # the cache failed and the origin answered instead (on_cache_error=origin)
              pa.field("fallback", pa.bool_()),
              # HTTP clients (issue 32): the response's status (0: not an HTTP request), its body
              # bytes, the HTTP cache's word from X-Cache-Status ('' none: CACHE_STATUSES) and
              # the Age header in seconds (-1: none)
              pa.field("http_status", pa.int16()), pa.field("http_bytes", pa.int64()),
              pa.field("cache_status", pa.string()), pa.field("age_s", pa.int32())]
WIRE_SCHEMA = pa.schema([*_WIRE_BASE, *WIRE_ADDED])

# Which trial a row belongs to: the first columns of requests, trials and expiries.
TRIAL_KEY = [
    pa.field("run_id", pa.string()),
    pa.field("trial", pa.int32()),
    pa.field("strategy", pa.string()),
    pa.field("repeat", pa.int32()),
]
# What the coordinator adds to every row before writing ``requests/``.
CONTEXT_FIELDS = [*TRIAL_KEY, pa.field("worker", pa.string())]
REQUEST_SCHEMA = pa.schema([*CONTEXT_FIELDS, *_WIRE_BASE, pa.field("in_window", pa.bool_()),
                            *WIRE_ADDED])

# One row per trial in ``trials.parquet``.
TRIAL_SCHEMA = pa.schema(
    [
        *TRIAL_KEY[:3],
        ("params", pa.string()),
        TRIAL_KEY[3],
        ("workers", pa.int32()),
        ("clients", pa.int32()),
        ("ttl_s", pa.float64()),
        ("window_s", pa.float64()),
        ("requests", pa.int64()),
        ("errors", pa.int64()),
        ("error_rate", pa.float64()),
        ("rps", pa.float64()),
        ("p50_ms", pa.float64()),
        ("p99_ms", pa.float64()),
        ("max_ms", pa.float64()),
        ("origin_calls", pa.int64()),
        ("expiry_events", pa.int64()),
        ("origin_per_expiry", pa.float64()),
        ("peak_origin_inflight", pa.int64()),
        ("stale_served", pa.int64()),
        ("waits", pa.int64()),
        ("db_calls", pa.int64()),
        ("db_calls_match", pa.bool_()),
        ("origin_calls_total", pa.int64()),
        ("floor_ms", pa.float64()),
        ("below_floor", pa.bool_()),
        ("start_spread_ms", pa.float64()),
        ("error_types", pa.string()),
        ("complete", pa.bool_()),
        # Columns below were added later; absent from older runs, so readers must tolerate them.
        ("p90_ms", pa.float64()),
        ("p999_ms", pa.float64()),
        ("max_worker_cpu", pa.float64()),
        ("max_loop_lag_ms", pa.float64()),
        ("max_release_late_ms", pa.float64()),
        ("saturated", pa.bool_()),
        ("db_time_ms", pa.float64()),
        ("local_hits", pa.int64()),
        ("refreshes", pa.int64()),  # background refresh rows (op = "refresh"), not requests
        ("stale_age_p50_ms", pa.float64()),
        ("stale_age_max_ms", pa.float64()),
        # Faults (coordinator --fault): what was injected, when, and what the clients saw.
        ("fault", pa.string()),  # every fault of the trial, ';'-separated; '' for none
        ("fault_at_s", pa.float64()),  # first fault's instant, seconds from the trial's start
        ("workers_lost", pa.int32()),  # workers whose rows never arrived (complete is False)
        ("fault_requests", pa.int64()),  # requests started while a fault held
        ("fault_errors", pa.int64()),
        ("fault_served", pa.int64()),  # of those, answered with a value (fail-open)
        ("fault_origin_calls", pa.int64()),
        ("fault_origin_per_s", pa.float64()),  # origin calls started per second while it held
        ("pre_fault_origin_per_s", pa.float64()),  # the same, trial start to the fault
        ("fault_pool_wait_p99_ms", pa.float64()),  # p99 pool wait of the origin calls under it
        ("fault_p99_ms", pa.float64()),  # p99 latency of the requests started while it held
        ("peak_origin_per_s", pa.int64()),  # most origin calls started in one 1-second bucket
        ("late_sends", pa.int64()),  # open loop: started more than LATE_MS after the intended instant
        ("dropped_sends", pa.int64()),  # open loop: never sent (an error row of type DroppedSend)
        # Observed events (results.figures.events): origin_calls / expiry_events / origin_per_expiry are
        # over the events in the window, each herd whole; the per-period figure is a cross-check.
        ("event_kind", pa.string()),  # what an event is here: expiry, refresh cycle, or both
        ("expiry_source", pa.string()),  # server, schedule, server with gap; stamp: refresh cycles
        ("herd_median", pa.float64()),  # origin calls per event, median over the window's events
        ("herd_max", pa.int64()),
        ("herd_duration_p50_ms", pa.float64()),  # first call's start to last call's end
        ("herd_duration_max_ms", pa.float64()),
        ("first_fill_p50_ms", pa.float64()),  # event to the end of its first origin call
        ("unattributed_calls", pa.int64()),  # origin calls with no event of their key before them
        ("window_origin_calls", pa.int64()),  # origin calls started in the window
        ("period_events", pa.int64()),  # TTL periods x primed keys (the earlier definition)
        ("origin_per_period", pa.float64()),  # window_origin_calls / period_events
        ("per_period_differs", pa.bool_()),  # the two figures differ by more than 10 %
        ("expiry_mode", pa.string()),  # drift (each expiry one TTL after its fill) or aligned
        ("aligned_max_ms", pa.float64()),  # largest |observed - scheduled| of the window's expiries
        # Consistency under writes (results.figures.consistency; 0 / NaN in a trial without writes).
        ("writes", pa.int64()),  # origin writes committed in the window
        ("stale_after_write", pa.int64()),  # reads that began after a newer version committed
        ("stale_after_write_share", pa.float64()),  # of the window's successful reads
        ("max_stale_ms", pa.float64()),  # longest commit -> last read of an older version
        ("stale_sets", pa.int64()),  # older versions written into the cache after a newer write
        # The servers' own word at the trial's end (coordinator.consistency): written keys whose
        # cache holds an older version than the origin, and those proven to be stale sets (still
        # there one value lifetime after the newer version committed).
        ("end_behind_keys", pa.int64()),
        ("end_stale_sets", pa.int64()),
        # on_cache_error=origin: origin calls of requests answered while the cache failed (in
        # the window); they belong to no expiry's herd.
        ("fallback_calls", pa.int64()),
        # Liveness (coordinator.trials.liveness, issue 15): why each missing worker's rows are missing
        # ("w3@host: lost: silent 5.2 s (limit 5 s)", "killed by a fault", ...; '; '-separated)
        # and the slow workers (silent for more than half the limit, then heard again).
        ("lost_workers", pa.string()),
        ("slow_workers", pa.string()),
        # What the defence cost the servers (coordinator.caches): commands the cache and the
        # lock store counted from just before the start instant to after the last row came in
        # (the counter reads left out), and per client request of the whole trial.
        ("cache_commands", pa.int64()),
        ("lock_commands", pa.int64()),
        ("cache_commands_per_request", pa.float64()),
        ("lock_commands_per_request", pa.float64()),
        ("cache_server", pa.string()),  # redis or memcached: the trial's cache
        # Delivery (issue 25: rows leave the workers while the trial runs, worker.shipper): what
        # reached Parquet of what the workers sent.
        ("batches_missing", pa.int64()),  # batches a worker sent (or counted) that never came
        ("batches_duplicated", pa.int64()),  # delivered twice, written once
        ("rows_dropped", pa.int64()),  # rows workers could not send (the coordinator behind)
        ("calls_dropped", pa.int64()),  # origin calls among them (PostgreSQL counted them)
        ("client_ships", pa.int64()),  # ships the clients made themselves, the shipper behind
        ("client_wait_s", pa.float64()),  # client time spent on those ships, summed over clients
        ("rows_written", pa.int64()),  # request rows of the trial in requests/
        ("late_rows", pa.int64()),  # rows that came after the trial was summarised (re-marked)
        # An origin call's median on the client (connection held to result), to set against
        # PostgreSQL's own time per call (db_time_ms / db_calls): a filler the trial's own load
        # kept off the CPU (the GIL) takes far longer than the query (results.outputs.table).
        ("origin_call_p50_ms", pa.float64()),
        # The origin's own count against the clients' (coordinator.origin.check): ok, mismatch,
        # or unchecked (no counter to read: db_calls is then -1, db_calls_match false), and
        # what was counted (or why nothing could be).
        ("db_check", pa.string()),
        ("db_check_detail", pa.string()),
        # How sure each figure is (results.figures.intervals, issue 26): the 95 % interval of a
        # figure is NAME_lo .. NAME_hi, NaN when its method had too few events, requests or
        # seconds to give one (docs/results.md says the methods and their minimums).
        ("origin_per_expiry_lo", pa.float64()),  # bootstrap over the window's events
        ("origin_per_expiry_hi", pa.float64()),
        ("herd_median_lo", pa.float64()),  # order statistics of the events' herds
        ("herd_median_hi", pa.float64()),
        ("herd_p90", pa.float64()),  # origin calls per event, 90th percentile over the events
        ("herd_p90_lo", pa.float64()),
        ("herd_p90_hi", pa.float64()),
        ("event_waits", pa.int64()),  # waits attributed to the window's events (their herds' rule)
        ("waits_per_event", pa.float64()),  # event_waits / expiry_events
        ("waits_per_event_lo", pa.float64()),
        ("waits_per_event_hi", pa.float64()),
        ("p50_ms_lo", pa.float64()),  # order statistics of the window's requests
        ("p50_ms_hi", pa.float64()),
        ("p99_ms_lo", pa.float64()),
        ("p99_ms_hi", pa.float64()),
        ("rate_bins", pa.int64()),  # the window's bins of about a second (rps, stale share)
        ("rps_lo", pa.float64()),  # bootstrap over the window's seconds
        ("rps_hi", pa.float64()),
        ("stale_share", pa.float64()),  # stale_served / requests
        ("stale_share_lo", pa.float64()),
        ("stale_share_hi", pa.float64()),
        # The HTTP layer (issue 32): the app processes that served the trial (0: none, the
        # strategy ran in the client threads), the HTTP cache in front ('' none: nginx, varnish),
        # its own counters over the trial (JSON: varnishstat's MAIN.*, nginx's stub_status) and
        # the cache statuses it put on the window's answers (JSON: X-Cache-Status word -> count).
        ("app_servers", pa.int32()),
        ("front", pa.string()),
        ("front_counters", pa.string()),
        ("cache_statuses", pa.string()),
        # A black-box trial (issue 33: --service-url): where its origin calls were counted
        # (pg_stat_statements or counter, sampled: samples.parquet; '' rows), the slowest
        # source's sample rate, the tool's scheduled deletes that removed a key and those the
        # cache reported back, and the events whose herds the two counts agree on within a call.
        ("origin_source", pa.string()),
        ("sample_hz", pa.float64()),
        ("deletes", pa.int64()),
        ("deletes_observed", pa.int64()),
        ("herds_agreeing", pa.int64()),
        ("herds_compared", pa.int64()),
        # What ran the clients (--client-driver): threads or asyncio ('' in older runs).
        ("client_driver", pa.string()),
    ]
)

OUTCOMES = tuple(o.name.lower() for o in sorted(Outcome))  # by code: the recorder's dictionary
CACHE_STATUSES = CACHE_STATUS_WORDS  # cache_status by code (model.http.CacheStatus): '' none, HIT...
LATE_MS = 10.0  # an open-loop send this far behind its intended instant counts as late
DROPPED = "DroppedSend"  # error type of an open-loop send given up (too late to be meaningful)
WRITE_OP = "write"  # op of an origin write (then the strategy's own invalidation or update)
LEGACY_WRITE_OP = "invalidate"  # the same rows in runs made before versions were recorded
REFRESH_OP = "refresh"  # op of a background job's row: counts origin calls, is not a request
# op of an app-tier row (app/): an origin call an app process made while answering an HTTP
# request; counts origin calls, is not a client's request (the client's row is that request)
APP_OP = "app"
NOT_REQUESTS = (REFRESH_OP, APP_OP)  # ops whose rows count origin calls but are no request
