"""Worker: a Celery task that runs one trial's client threads on this host."""

import os

_POOL_ENV = "ARROW_DEFAULT_MEMORY_POOL"

# pyarrow's C++ default pool is mimalloc unless this names another when libarrow first
# allocates: mimalloc reserves a 1 GiB arena on transparent huge pages, and the IPC writer and
# compute kernels allocate there even after ``pa.set_memory_pool`` (worker.tasks). In a
# two-level soak that arena held 55 MB of a worker's 265 MB, 49 MB of it huge pages. Set here,
# before anything of the worker imports pyarrow, read at once, then taken out of the
# environment again: the processes this one starts (a benchmark's coordinator) keep their own.
if _POOL_ENV not in os.environ:
    os.environ[_POOL_ENV] = "system"
    import pyarrow

    pyarrow.default_memory_pool()
    del os.environ[_POOL_ENV]
