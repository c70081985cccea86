"""The app tier: app-server processes that host the strategies behind HTTP (beside worker/)."""

import worker  # noqa: F401  # first: glibc's allocator for pyarrow's C++ pool (worker/__init__.py)
