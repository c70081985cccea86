"""The app tier: app-server processes that host the strategies behind HTTP (beside worker/)."""

import os

# glibc's allocator for pyarrow's C++ pool, set before pyarrow loads: why in worker/__init__.py.
os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
