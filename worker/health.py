"""A worker liveness probe that keeps answering while a trial runs.

``celery inspect ping`` cannot serve as the container healthcheck: the solo pool handles control
messages on the same thread that runs the task, so during a trial it answers "No nodes replied"
(rc 69) and a run longer than interval x retries marks every worker unhealthy (NotReady in k8s).
Instead, once the worker is ready, its beater process (worker.heartbeat, outside the worker's
GIL) touches ``STAMPEDE_HEALTH_FILE`` every quarter second while the worker runs, and ``python -m
worker.health`` (the compose healthcheck, the k8s probe) succeeds while that file is younger than
``STAMPEDE_HEALTH_MAX_AGE`` seconds. The beat stops when Celery shuts the worker down or the
worker is stopped, so a stopping or frozen worker turns unhealthy, and a dead one takes its
container with it. This module imports nothing heavy: the probe runs every few seconds in each
container.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

FILE_ENV = "STAMPEDE_HEALTH_FILE"
MAX_AGE_ENV = "STAMPEDE_HEALTH_MAX_AGE"
DEFAULT_MAX_AGE_S = 10.0

def check(path: Path, max_age_s: float, now: float | None = None) -> str | None:
    """None when the beat is fresh, else why the worker is not healthy (one line)."""
    try:
        age = (time.time() if now is None else now) - path.stat().st_mtime
    except FileNotFoundError:
        return f"{path} does not exist: the worker is not ready yet (or {FILE_ENV} differs)"
    if age > max_age_s:
        return f"{path} is {age:.1f} s old (max {max_age_s:g} s): the worker stopped beating"
    return None


def main() -> int:
    """The probe: exit 0 when healthy, 1 with one line when not, 2 when misconfigured."""
    name = os.environ.get(FILE_ENV)
    try:
        max_age = float(os.environ.get(MAX_AGE_ENV, DEFAULT_MAX_AGE_S))
    except ValueError:
        print(f"worker.health: {MAX_AGE_ENV} must be a number of seconds", file=sys.stderr)
        return 2
    if not name:
        print(f"worker.health: {FILE_ENV} is not set (the image sets it)", file=sys.stderr)
        return 2
    problem = check(Path(name), max_age)
    if problem is not None:
        print(f"worker.health: unhealthy: {problem}", file=sys.stderr)
        return 1
    print("worker.health: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
