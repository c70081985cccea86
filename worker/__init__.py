"""Worker: a Celery task that runs one trial's client threads on this host."""

import os

# Before anything imports pyarrow: its C++ default pool (read once, at libarrow's first
# allocation) is mimalloc, which reserves a 1 GiB arena on transparent huge pages; the IPC
# writer and compute kernels allocate there even after ``pa.set_memory_pool`` (worker.tasks).
# In a two-level soak that arena held 55 MB of a worker's 265 MB (49 MB of it huge pages).
os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
