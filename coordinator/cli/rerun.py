"""``coordinator rerun RUN_DIR``: the experiment of a finished run again, from its manifest.

Options come from run.json's manifest as they were resolved (never from today's defaults or
preset definitions); services may be given anew, since credentials were never written, and so
may the namespace lab's link control (``--net-control``; else the recorded one). After
the run it says which options, versions or host facts differ from the original.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from coordinator.cli.config_checks import check_config
from coordinator.cli.given import given_from, services_from
from coordinator.cli.launch import execute, new_run_id, typed_argv
from coordinator.config import LaunchConfig
from coordinator.manifest import Manifest, ManifestError, mask_argv
from model.custom import OriginKind
from model.services import Services
from results.outputs import config_diff
from results.outputs.text import grid
from results.store import rundir


def load(run_dir: Path) -> tuple[str, dict[str, Any], Manifest]:
    """The run's id, its run.json and its manifest; bad input (exit 2) when there is none."""
    path = run_dir / "run.json"
    if not path.is_file():
        raise click.BadParameter(f"{run_dir} holds no run.json", param_hint="RUN_DIR")
    try:
        meta = rundir.read_meta(run_dir)
        return str(meta.get("run_id", run_dir.name)), meta, Manifest.from_json(meta)
    except ValueError as exc:  # ManifestError, or run.json that is not JSON
        raise click.BadParameter(f"{path}: {exc}", param_hint="RUN_DIR") from None


def _given(manifest: Manifest, options: dict[str, Any], run_id: str,
           meta: dict[str, Any]) -> tuple[Services | None, Services | None]:
    """The services given now: all of them for a run on remote services, and at least those
    the original run was given beside its embedded stack (``--origin-dsn``...)."""
    origin = (manifest.options.get("workload") or {}).get("origin") or {}
    http = origin.get("kind") == OriginKind.HTTP.value
    services = services_from(options, http)
    if services is None and not manifest.options.get("embedded_stack", True):
        cache = meta.get("services", {}).get("cache_url", "?")
        raise click.UsageError(f"run {run_id} ran on remote services (cache {cache}); give "
                               "--cache-url --lock-url --broker-url --origin-dsn again "
                               "(credentials were never written)")
    given = None if services is not None else given_from(options, http)
    have = {k for k, v in vars(given).items() if v} if given else set()
    missing = sorted(set(manifest.options.get("given") or []) - have)
    if services is None and missing:
        flags = " ".join("--" + m.replace("_", "-") for m in missing)
        raise click.UsageError(f"run {run_id} was given {flags}; give it again (credentials "
                               "were never written)")
    return services, given


def config_for(run_id: str, meta: dict[str, Any], manifest: Manifest,
               options: dict[str, Any]) -> LaunchConfig:
    """The recorded experiment on the services given now (or the embedded stack)."""
    origin = (manifest.options.get("workload") or {}).get("origin") or {}
    if origin.get("kind") == OriginKind.SERVICE.value:  # the service and its counts are the user's
        raise click.UsageError(f"run {run_id} measured a running service (--service-url): launch "
                               "it again with the same options (docs/black-box.md)")
    services, given = _given(manifest, options, run_id, meta)
    try:
        config = manifest.config(options["out"] or Path("runs") / new_run_id(), services,
                                 options["repeat"])
    except ManifestError as exc:
        raise click.BadParameter(str(exc), param_hint="RUN_DIR") from None
    config = replace(config, command=mask_argv(typed_argv(), services or given), rerun_of=run_id,
                     net_control=options.get("net_control") or config.net_control, given=given)
    check_config(config)
    return config


def differences(original: Manifest, again: Manifest) -> str:
    """What differs between the original run's manifest and the rerun's."""
    found = config_diff.differences(original.to_json(), again.to_json())
    if not found:
        return "rerun: the same options, seeds, versions and hosts as the original run"
    rows = [[name, config_diff.show(a), config_diff.show(b)] for name, a, b in found]
    return ("rerun: differs from the original run in:\n"
            + grid(("setting", "original", "rerun"), rows))


def rerun(run_dir: Path, options: dict[str, Any]) -> None:
    run_id, meta, original = load(run_dir)
    config = config_for(run_id, meta, original, options)
    quiet = bool(options.get("quiet"))
    if not quiet:
        click.echo(f"rerun of {run_id}: {' '.join(original.command) or '(command not recorded)'}",
                   err=True)
    root = execute(config, quiet=quiet)
    _, _, again = load(root)
    click.echo(differences(original, again))
