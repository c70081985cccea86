"""Celery tasks. Arguments are validated before anything runs: a task message is untrusted."""

from __future__ import annotations

import logging
import time
from typing import Any

import pyarrow as pa
from celery import Task

from model.hostfacts import host_facts
from model.services import Services
from model.wire import (
    BASELINE,
    CLOCK,
    HOST_FACTS,
    PLUGINS,
    RUN_TRIAL,
    InvalidTaskArguments,
    TrialSpec,
)
from results.store import transport
from strategies.plugins import installed
from worker.app import app
from worker.baseline import BaselineSpec, run_baseline
from worker.recorder import Recorder
from worker.trial import run_trial

log = logging.getLogger(__name__)


def _warm_up() -> None:
    """Pay one-time costs (pyarrow's lazy imports) when the worker starts, not inside the first
    trial's lead time, where they made it start late (pyarrow's look for pandas is answered
    before: worker.recorder)."""
    # pyarrow's default pool, mimalloc: two-level at full rate peaked at 363 MB a worker in a
    # 2-minute soak; glibc's malloc (two arenas, coordinator.stack.celery_workers) at 238 MB
    # (README, Performance). Likely why: mimalloc keeps pages in the heap of the thread that
    # allocated them, and 25 client threads a process each build batches (a full client ships
    # its own rows).
    pa.set_memory_pool(pa.system_memory_pool())
    transport.decode(transport.encode(Recorder(0, ["warm-up"]).to_batch()))


_warm_up()


@app.task(name=RUN_TRIAL, bind=True)
def run_trial_task(self: Task, spec: object) -> dict[str, Any]:
    """Run one trial's share of clients on this worker; its rows go to the trial's stream."""
    try:
        trial = TrialSpec.from_json(spec)
    except InvalidTaskArguments as exc:
        log.error("rejected task %s: %s", self.request.id, exc)
        raise
    return run_trial(trial, Services.from_env()).to_json()


@app.task(name=CLOCK)
def clock_task() -> int:
    """This host's wall clock, for the coordinator's offset estimate."""
    return time.time_ns()


@app.task(name=HOST_FACTS)
def host_facts_task() -> dict[str, Any]:
    """This worker host's facts (cores, memory, kernel) for the run's manifest."""
    return host_facts()


@app.task(name=PLUGINS)
def plugins_task(names: object) -> dict[str, str]:
    """Import the run's plug-ins here and report their versions (coordinator.plugins)."""
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names) or len(names) > 64:
        raise InvalidTaskArguments("plugins: a list of up to 64 names")
    return installed(names)


@app.task(name=BASELINE)
def baseline_task(spec: object) -> dict[str, Any]:
    """Plain GETs on the same threads, for the generator-efficiency benchmark."""
    return run_baseline(BaselineSpec.from_json(spec), Services.from_env())
