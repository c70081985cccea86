"""``coordinator simulate``: the registered strategies in the discrete-event model (simulate/).

Thin on purpose: options in, ``simulate.runner`` does the work, ``simulate.saved`` writes the
run directory and prints its table as ``report`` reads it, ``simulate.validate`` checks measured
runs. Bad input is click's one line and exit 2 (``coordinator.cli.commands.main``), like every
command.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from coordinator import defaults
from coordinator.cli.launch import new_run_id, typed_argv
from coordinator.cli.options import strategy_list
from simulate import calibrate, saved
from simulate import validate as validation
from simulate.runner import simulate
from simulate.store import NotModelled
from simulate.world import WorldSpec
from strategies.registry import StrategySpec, strategy_class


def ported(ctx: click.Context, param: click.Parameter, value: str) -> tuple[StrategySpec, ...]:
    """``--strategies`` as ``launch`` parses it, limited to the strategies whose logic is in
    strategies.core (the model runs that code; the threaded-only ones it cannot)."""
    specs = strategy_list(ctx, param, value)
    bad = [s.label for s in specs if not getattr(strategy_class(s.name), "sans_io", False)]
    if bad:
        raise click.BadParameter(f"not modelled (logic not in strategies.core): {', '.join(bad)}",
                                 ctx, param)
    return specs


MIN_REPLICATIONS = 10  # issue 35: validation intervals over >= 10 replications

# The options --from may set, by the WorldSpec field each one is.
CALIBRATED = {"app_servers": "app_servers", "clients": "clients", "ttl_s": "ttl_s",
              "origin_ms": "origin_ms", "rtt_us": "rtt_us", "think_ms": "think_ms",
              "cpu_us": "cpu_us"}


def given(ctx: click.Context) -> set[str]:
    """The calibrated fields set on the command line: they win over the measured run's."""
    return {field for name, field in CALIBRATED.items()
            if ctx.get_parameter_source(name) is not ParameterSource.DEFAULT}


def typed_elsewhere(ctx: click.Context) -> set[str]:
    """The options given that ``--validate`` would ignore (it takes only the replications and
    the seed): refused rather than silently dropped."""
    kept = {"validate", "run_dirs", "replications", "seed"}
    return {p.opts[0] for p in ctx.command.params if p.name not in kept and p.name is not None
            and ctx.get_parameter_source(p.name) is not ParameterSource.DEFAULT}


@click.command("simulate")
@click.option("--strategies", callback=ported, default="naive,lock-dc,xfetch", show_default=True,
              help="Comma-separated strategies, as for launch (ported ones only).")
@click.option("--app-servers", type=click.IntRange(1, 100_000), default=8, show_default=True,
              help="App processes, each with its own strategy instance and origin pool.")
@click.option("--clients", type=click.IntRange(1, 100_000), default=25, show_default=True,
              help="Clients per app server (closed loop) or its request slots (open loop).")
@click.option("--ttl", "ttl_s", type=click.FloatRange(0.05, 3600), default=defaults.TTL_S,
              show_default=True, help="Cache TTL in seconds.")
@click.option("--origin-ms", type=click.FloatRange(0, 60_000, min_open=True),
              default=defaults.ORIGIN_TARGET_MS, show_default=True,
              help="The origin's median service time in ms.")
@click.option("--rtt-us", type=click.FloatRange(0, 1_000_000), default=200.0, show_default=True,
              help="One cache or lock-store round trip in microseconds.")
@click.option("--cpu-us", type=click.FloatRange(0, 1_000_000), default=0.0, show_default=True,
              help="Each app server's interpreter held this long per reply, first come first "
                   "served (the client's own CPU queue); 0: none.")
@click.option("--pool-size", type=click.IntRange(1, 10_000), default=defaults.POOL_SIZE,
              show_default=True, help="Origin connections per app server.")
@click.option("--think-ms", type=click.FloatRange(0, 60_000), default=30.0, show_default=True,
              help="Closed loop: mean (exponential) think time between a client's requests "
                   "(30: about experiment 000's 6,200 requests/s at 200 clients).")
@click.option("--rate", type=click.FloatRange(0, 1e9, min_open=True), default=None,
              help="Open loop: Poisson arrivals, requests/s over all app servers.")
@click.option("--expiries", type=click.IntRange(1, 1000), default=3, show_default=True,
              help="Expiry events (herds) per replication.")
@click.option("--replications", type=click.IntRange(1, 1000), default=10, show_default=True,
              help="Seeded replications per strategy (intervals need 8 or more).")
@click.option("--bulk-hits/--no-bulk-hits", default=True, show_default=True,
              help="Closed loop: count the hits that decide nothing in bulk (naive, lock and "
                   "lock-dc between expiries, xfetch before its early window: the same "
                   "distribution, far faster).")
@click.option("--seed", type=click.IntRange(0), default=0, show_default=True,
              help="First replication's seed.")
@click.option("--from", "from_run", type=click.Path(path_type=Path, file_okay=False),
              default=None, help="Measured run directory: its cache round trip, origin time, "
                                 "topology, TTL and rate (as think time) replace the defaults; "
                                 "options given here win.")
@click.option("--out", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Run directory [default: runs/<run_id>]; must not hold a run already.")
@click.option("--validate", is_flag=True,
              help="Rebuild each measured RUN_DIR (as --from), simulate it and print whether "
                   "each simulated figure falls in the measured 95 % interval; writes nothing.")
@click.argument("run_dirs", nargs=-1, type=click.Path(path_type=Path, file_okay=False))
def simulate_command(strategies: tuple[StrategySpec, ...], app_servers: int, clients: int,
                     ttl_s: float, origin_ms: float, rtt_us: float, cpu_us: float, pool_size: int,
                     think_ms: float, rate: float | None, expiries: int, replications: int,
                     bulk_hits: bool, seed: int, from_run: Path | None, out: Path | None,
                     validate: bool, run_dirs: tuple[Path, ...]) -> None:
    """Simulate the strategies on a modelled cache, lock store and origin; write the run
    directory and print its table (or, with --validate, check the model against measured runs)."""
    if validate or run_dirs:
        if not (validate and run_dirs):
            raise click.UsageError("--validate takes one or more measured RUN_DIRs; RUN_DIRs "
                                   "need --validate")
        if ignored := sorted(typed_elsewhere(click.get_current_context())):
            raise click.UsageError(f"--validate rebuilds each run as measured: {', '.join(ignored)} "
                                   "cannot be given with it")
        validate_command(run_dirs, replications, seed)
        return
    world = WorldSpec("", app_servers, clients, ttl_s, origin_ms, pool=pool_size, rtt_us=rtt_us,
                      think_ms=think_ms, rate=rate, expiries=expiries, bulk_hits=bulk_hits,
                      cpu_us=cpu_us)
    if from_run is not None:
        try:
            world = calibrate.from_run(from_run, world, given(click.get_current_context()))
        except calibrate.Unreadable as exc:
            raise click.BadParameter(str(exc), param_hint="'--from'") from None
        click.echo(calibrate.describe(from_run, world))
    run_world(world, [s.label for s in strategies], replications, seed, out,
              None if from_run is None else str(from_run))


def run_world(world: WorldSpec, labels: list[str], replications: int, seed: int,
              out: Path | None, from_run: str | None) -> Path:
    """Simulate, write the run directory, print its table as ``report`` reads it back (one
    computation for both); ``rerun`` of a simulated run comes here too."""
    run_id = new_run_id()
    root = out or Path("runs") / run_id
    if root.exists() and any(root.iterdir()):
        raise click.BadParameter(f"{root} already exists and is not empty; choose another "
                                 "directory", param_hint="--out")
    started = time.perf_counter()
    try:
        sims = simulate(labels, world, replications, seed)
    except NotModelled as exc:  # the run cannot be modelled: exit 1, not bad input
        raise click.ClickException(f"simulate: {exc}") from None
    meta = saved.meta_json(run_id, world, labels, replications, seed, typed_argv(), from_run)
    try:
        saved.write_run(root, meta, sims)
    except OSError as exc:  # RunExists (a run appeared meanwhile) or a directory not writable
        raise click.BadParameter(f"cannot write {root}: {exc}", param_hint="--out") from None
    click.echo(saved.render_run(root))
    click.echo(f"\nsimulated in {time.perf_counter() - started:.1f} s of this machine's time; "
               f"run: {root} (no request rows: figures per replication only)")
    return root


def rerun_simulated(run_dir: Path, meta: dict[str, Any], out: Path | None) -> None:
    """``coordinator rerun`` of a simulated run: the recorded world, strategies, replications
    and seed simulated again into a new directory."""
    try:
        world = saved.world_of(meta)
        labels = [str(s) for s in meta["strategies"]]
        replications, seed = int(meta["replications"]), int(meta["seed"])
    except (ValueError, KeyError, TypeError) as exc:
        raise click.BadParameter(f"{run_dir}: not a readable simulated run: {exc}",
                                 param_hint="RUN_DIR") from None
    click.echo(f"rerun of simulated run {meta.get('run_id', run_dir.name)}", err=True)
    run_world(world, labels, replications, seed, out, meta.get("from_run"))


def validate_command(runs: tuple[Path, ...], replications: int, seed: int) -> None:
    """``--validate``: every run rebuilt and checked; a run that cannot be read is bad input."""
    if replications < MIN_REPLICATIONS:
        raise click.BadParameter(f"--validate needs {MIN_REPLICATIONS} or more replications",
                                 param_hint="'--replications'")
    checks = []
    for root in runs:
        if (root / "run.json").is_file() and saved.is_simulated(saved.read_meta_or_empty(root)):
            raise click.BadParameter(f"{root} is a simulated run: validate against measured runs",
                                     param_hint="'--validate'")
        try:
            checks.extend(validation.check_run(root, replications, seed))
        except calibrate.Unreadable as exc:  # its message names the directory
            raise click.BadParameter(str(exc), param_hint="'--validate'") from None
        except (OSError, KeyError, ValueError) as exc:
            raise click.BadParameter(f"{root}: {exc}", param_hint="'--validate'") from None
        except NotModelled as exc:
            raise click.ClickException(f"simulate: {exc}") from None
    click.echo(validation.render(checks))
