"""Every default of ``coordinator launch`` in one place, with why it is what it is.

The experiment defaults reproduce experiment 000 (shared/seeds/000_*): 200 clients, TTL 2 s,
one hot key, an origin query of a few milliseconds.
"""

from dataclasses import dataclass

WORKERS = 8
CLIENTS = 200  # in total, split as evenly as possible over the workers
TTL_S = 2.0
SECONDS = 10.0  # per trial
REPEAT = 1
ON_WORKER_LOSS = "continue"  # --on-worker-loss: go on with the survivors (coordinator.trials.liveness)
STRATEGIES = "naive,lock"
OUT_DIR = "runs"

# Origin: rows seeded into ``orders`` on the embedded stack, and the median the origin query
# is tuned to (experiment 000 measured 3.43 ms).
SCALE = 1_000_000
ORIGIN_TARGET_MS = 3.43
POOL_SIZE = 4  # origin connections per worker (8 x 4 = 32, well under max_connections)
HOT_KEY = "orders:0"
# The app tier (--app-servers): request threads per app process. granian's WSGI answers one
# request per blocking thread; 32 lets a process hold its share of 200 clients' requests while a fill
# waits on the origin (a real service's thread pool is of this order), and bounds its lock and
# origin connections (each thread owns its own).
APP_THREADS = 32
# Most app processes the embedded stack starts per core: each is a Python process of ~100 MB
# that shares the cores with the workers and the servers.
APP_PROCESSES_PER_CORE = 8
# Every connection the coordinator opens (PostgreSQL, Redis, the Celery broker and result store)
# gives up connecting after this many seconds: a service that never answers (a dropped SYN, a
# host gone) fails the run with one line instead of hanging it (coordinator/connect.py). Whole
# seconds: libpq counts no finer (and at least 2). Kept shorter on purpose: the embedded stack's
# readiness polls (0.5-1 s), the expiry listener's resubscribe (2 s) and the measured path's own
# clients (model/services.py: Redis 2 s, origin pool 5 s), which the workers share.
CONNECT_TIMEOUT_S = 5
# A black-box service (--service-url): how often the coordinator samples each count of its
# origin calls. The issue asks for at least 50 Hz (a herd of a 20 ms query then spans a sample or
# two); twice that keeps the floor on a coordinator busy gathering rows.
SAMPLE_HZ = 100.0
SAMPLE_MIN_HZ = 50.0  # a trial sampled slower than this says so under the table


@dataclass(frozen=True)
class Timing:
    """Timing constants that tests may shrink (Locust's lesson)."""

    lead_s: float = 1.5  # dispatch to the common start instant: every worker ready by then
    warmup_s: float = 1.0  # from the start instant to the measurement window
    progress_s: float = 0.5  # how often workers send their rows (worker.shipper): the progress line
    worker_wait_s: float = 60.0  # how long to wait for N workers to answer
    # Remote mode: how long to wait for cache, lock store, broker and origin to answer
    # (--service-timeout; coordinator.probe). A Kubernetes apply or a compose up starts the
    # coordinator with the services; a fresh PostgreSQL initialising its data directory takes
    # 10-60 s on a small node. 0: ask once.
    service_wait_s: float = 120.0
    gather_grace_s: float = 60.0  # after a trial's end, how long to wait for its results
    # A worker whose heartbeat (every progress_s) stops for this long is lost at once: its share
    # is given up and it is out of later trials (--worker-silence; coordinator.trials.liveness). Ten
    # heartbeats: a saturated worker still beats well within it.
    worker_silence_s: float = 5.0
