"""The run's plug-ins on every worker: each worker imports them and reports their versions
before the first trial; one that lacks a plug-in, or has another version, stops the launch with
exit 2 naming the worker (a defence measured with two codes is no measurement).

Strategies from an installed package's entry point are checked the same way, by the version of
the distribution that provides them."""

from __future__ import annotations

from collections.abc import Sequence

import click
from celery import Celery
from celery.exceptions import CeleryError
from celery.utils import worker_direct

from model.wire import PLUGINS
from strategies import StrategySpec, registry
from strategies.plugins import PluginError, load_all

ASK_TIMEOUT_S = 15.0


def expected(modules: Sequence[str], specs: Sequence[StrategySpec]) -> dict[str, str]:
    """What every worker must have: each ``--plugin`` module's version, and the distribution
    version of each strategy the run takes from an entry point (``dist:NAME``)."""
    try:
        want = load_all(list(modules))
    except PluginError as exc:
        raise click.BadParameter(str(exc), param_hint="--plugin") from None
    for spec in specs:
        point = registry._entry_points().get(spec.name)
        if point is not None and point.dist is not None and point.dist.name != "stampede-lab":
            want[f"dist:{point.dist.name}"] = point.dist.version
    return want


def check_workers(app: Celery, workers: Sequence[str], want: dict[str, str]) -> dict[str, str]:
    """Ask every worker for ``want``'s versions; bad input (exit 2) naming the first worker that
    lacks one or has another. Returns ``want`` (run.json's manifest keeps it)."""
    if not want:
        return want
    asked = [(w, app.send_task(PLUGINS, args=[sorted(want)], queue=worker_direct(w)))
             for w in workers]
    for worker, result in asked:
        try:
            have = result.get(timeout=ASK_TIMEOUT_S)
        except (CeleryError, TimeoutError, OSError) as exc:
            raise click.BadParameter(f"worker {worker} did not report its plug-ins "
                                     f"({type(exc).__name__}: an older worker?)",
                                     param_hint="--plugin") from None
        for name, version in want.items():
            got = have.get(name) if isinstance(have, dict) else None
            if got != version:
                raise click.BadParameter(
                    f"worker {worker} has {name} {got or 'missing'}, the coordinator {version}: "
                    "every worker must load the same plug-ins (install it there, or put it on "
                    "its PYTHONPATH)", param_hint="--plugin")
    return want
