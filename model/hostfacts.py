"""The facts of the machine a process runs on, recorded per host in run.json's manifest.

Both sides use it: the coordinator for itself, each worker when asked (task ``HOST_FACTS``).
"""

from __future__ import annotations

import os
import platform
import socket
from typing import Any


def memory_bytes() -> int | None:
    """Physical memory of the host (None where the OS does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def host_facts() -> dict[str, Any]:
    """Hostname, cores, memory, kernel, architecture and Python of this process's host."""
    return {
        "hostname": socket.gethostname(),
        "cores": os.cpu_count(),
        "memory_bytes": memory_bytes(),
        "kernel": f"{platform.system()} {platform.release()}",
        "machine": platform.machine(),
        "python": platform.python_version(),
    }
