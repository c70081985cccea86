"""``coordinator``: launch an experiment, or report on a finished one.

Exit codes: 0 success, 1 the run failed, 2 bad input (one line naming the option), 3 a worker
was lost (the run went on degraded, or stopped with --on-worker-loss fail), 130 Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from coordinator import defaults
from coordinator.cli.app_options import app_options
from coordinator.cli.launch import RunFailed, launch
from coordinator.cli.options import (
    fault_list,
    liveness_options,
    net_control_option,
    observe_options,
    plugin_list,
    service_options,
    strategy_list,
    target_width_option,
)
from coordinator.cli.origin_options import origin_options
from coordinator.cli.rerun import rerun
from coordinator.cli.service_options import black_box_options
from coordinator.cli.simulate import rerun_simulated, simulate_command
from coordinator.cli.traffic_options import traffic_options
from coordinator.cli.workload_options import workload_options
from coordinator.trials.liveness import WorkersLost
from coordinator.trials.plan import ExpiryMode
from model.services import ClientDriver, RedisPath
from results.figures import repeats
from results.outputs import compare, summary
from results.outputs.report import html_report
from results.store import rundir
from simulate import saved

EXIT_FAILED, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 1, 2, 130
EXIT_WORKER_LOST = 3  # coordinator.trials.liveness: run.json status degraded (or incomplete with fail)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def cli() -> None:
    """Measure cache stampedes under real distributed load."""


@cli.command("launch")
@click.option("--plugin", "plugins", multiple=True, is_eager=True, callback=plugin_list,
              metavar="MODULE",
              help="Import MODULE (on the path) for the strategies it registers, here and in "
                   "every worker, which must report the same version (repeatable; docs/plugins.md).")
@click.option("--workers", type=click.IntRange(1, 256), default=defaults.WORKERS,
              show_default=True, help="Celery workers (local processes on the embedded stack).")
@click.option("--clients", type=click.IntRange(1, 100_000), default=defaults.CLIENTS,
              show_default=True, help="Client threads in total, split over the workers.")
@click.option("--strategies", callback=strategy_list, default=defaults.STRATEGIES,
              show_default=True, help="Comma-separated strategies, e.g. naive,lock,lock:poll_ms=2.")
@click.option("--ttl", "ttl_s", type=click.FloatRange(0.05, 3600), default=defaults.TTL_S,
              show_default=True, help="Cache TTL in seconds.")
@click.option("--seconds", type=click.FloatRange(0.5, 3600), default=defaults.SECONDS,
              show_default=True, help="Length of each trial in seconds.")
@click.option("--repeat", type=click.IntRange(1, 100), default=defaults.REPEAT,
              show_default=True, help="Repeats of each strategy (interleaved).")
@click.option("--out", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Run directory [default: runs/<run_id>]; must not hold a run already.")
@click.option("--scale", type=click.IntRange(1000, 100_000_000), default=defaults.SCALE,
              show_default=True, help="Rows seeded into the orders table.")
@click.option("--pool-size", type=click.IntRange(1, 200), default=defaults.POOL_SIZE,
              show_default=True, help="Origin connections per worker.")
@click.option("--origin-ms", "origin_target_ms", type=click.FloatRange(0.1, 10_000),
              default=defaults.ORIGIN_TARGET_MS, show_default=True,
              help="Median the origin query is tuned to.")
@click.option("--seed/--no-seed", default=None,
              help="Seed and calibrate the origin [default: only a PostgreSQL the embedded stack "
                   "starts; your own --origin-sql never].")
@service_options
@click.option("--worker-timeout", type=click.FloatRange(1, 3600), default=None,
              help=f"Seconds to wait for --workers workers to answer [default: "
                   f"{defaults.Timing().worker_wait_s:g}].")
@click.option("--service-timeout", type=click.FloatRange(0, 3600), envvar="STAMPEDE_SERVICE_TIMEOUT",
              default=None,
              help=f"Remote services: seconds to wait for cache, lock store, broker and origin to "
                   f"answer (not resolving, refusing or starting up: retried each second, with "
                   f"progress lines) before giving up with exit 2; 0: ask once [default: "
                   f"{defaults.Timing().service_wait_s:g}; env STAMPEDE_SERVICE_TIMEOUT].")
@click.option("--force-clock", is_flag=True,
              help="Run even if worker clock offsets are too uncertain for the TTL (above 5%).")
@click.option("--fault", "faults", multiple=True, callback=fault_list,
              metavar="TARGET:ACTION@SECONDS[+DURATION]",
              help="Inject a fault in every trial (repeatable; embedded stack only), e.g. "
                   "lock-store:kill@5, lock-store:pause@4+2, cache:kill@3, origin:lock@3+2, "
                   "origin:exhaust@3+2, worker:kill@3, worker:kill:w2@3 (worker w2), "
                   "broker:restart@SECONDS>=--seconds.")
@net_control_option("")
@click.option("--expiry", type=click.Choice([m.value for m in ExpiryMode]),
              default=ExpiryMode.DRIFT.value, show_default=True,
              help="drift: each value lives one TTL after its fill (experiment 000); aligned: every "
                   "value expires at the next TTL boundary of the trial's clock (synchronized); "
                   "scheduled-delete (--service-url): the tool deletes the keys on "
                   "--service-cache-url at shared instants every --ttl seconds.")
@click.option("--redis-client", type=click.Choice([p.value for p in RedisPath]),
              envvar="STAMPEDE_REDIS_CLIENT", default=RedisPath.LEAN.value, show_default=True,
              help="How client threads reach the cache and the lock store: lean (a connection "
                   "owned by each thread, commands packed once) or pooled (redis.Redis over a "
                   "shared pool, as before); docs/redis-client.md [env STAMPEDE_REDIS_CLIENT].")
@click.option("--client-driver", type=click.Choice([d.value for d in ClientDriver]),
              envvar="STAMPEDE_CLIENT_DRIVER", default=ClientDriver.THREADS.value,
              show_default=True,
              help="What runs each worker's clients: threads (one thread per client) or asyncio "
                   "(one coroutine per client, each on a connection of its own, in one event loop "
                   "per worker: thousands of clients a host; in the clients, the strategies ported "
                   "to strategies.core only; behind --app-servers or --service-url any strategy, "
                   "the clients sending GETs); docs/distributed.md [env STAMPEDE_CLIENT_DRIVER].")
@workload_options
@app_options
@traffic_options
@origin_options
@black_box_options
@liveness_options
@observe_options
@target_width_option
@click.option("--quiet", is_flag=True, help="Print only the table.")
def launch_command(**options: object) -> None:
    """Run every strategy, write runs/<run_id>/, print the summary table."""
    launch(options)


def _run_dir(run_dir: Path, hint: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """run.json (empty when absent) and the trials of a run this version can read."""
    if not (run_dir / "trials.parquet").exists():
        raise click.BadParameter(f"{run_dir} holds no trials.parquet", param_hint=hint)
    try:
        meta = rundir.read_meta(run_dir) if (run_dir / "run.json").is_file() else {}
        rundir.check_readable(meta)
    except ValueError as exc:  # UnreadableRun, or run.json that is not JSON
        raise click.BadParameter(f"{run_dir}: {exc}", param_hint=hint) from None
    trials: list[dict[str, Any]] = rundir.read_trials(run_dir).to_pylist()
    return meta, trials


@cli.command("report")
@click.argument("run_dir", type=click.Path(path_type=Path, file_okay=False))
@target_width_option
def report_command(run_dir: Path, target_width: float | None) -> None:
    """Print the summary table of a run; write RUN_DIR/report.html and the PNGs beside it."""
    meta, _ = _run_dir(run_dir, "RUN_DIR")
    if saved.is_simulated(meta):  # simulate's own table; no request rows for report.html
        click.echo(saved.render_run(run_dir))
        click.echo("\nreport: simulated run: no request rows, so no report.html or plots")
        return
    click.echo(summary.render_summary(run_dir, events=True, target_width=target_width))
    try:
        written = html_report.write_report(run_dir)
    except html_report.MissingExtra as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"report: {written.html}  plots: {', '.join(p.name for p in written.pngs)}")


@cli.command("compare")
@click.argument("run_a", type=click.Path(path_type=Path, file_okay=False))
@click.argument("run_b", type=click.Path(path_type=Path, file_okay=False))
def compare_command(run_a: Path, run_b: Path) -> None:
    """How the runs differ in configuration, then per strategy each figure's difference with its
    95 % interval (different / not distinguishable), then the trials side by side (B - A)."""
    (meta_a, a), (meta_b, b) = _run_dir(run_a, "RUN_A"), _run_dir(run_b, "RUN_B")
    events_a, events_b = (repeats.events_of(rundir.read_expiries(r)) for r in (run_a, run_b))
    click.echo(compare.render_runs(meta_a, a, meta_b, b, events_a, events_b))


@cli.command("rerun")
@click.argument("run_dir", type=click.Path(path_type=Path, file_okay=False))
@click.option("--out", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Run directory [default: runs/<run_id>]; must not hold a run already.")
@click.option("--repeat", type=click.IntRange(1, 100), default=None,
              help="Repeats of each strategy [default: as recorded].")
@service_options
@net_control_option(" [default: as recorded]")
@click.option("--quiet", is_flag=True, help="Print only the table and the differences.")
def rerun_command(run_dir: Path, **options: object) -> None:
    """Run RUN_DIR's experiment again from its manifest; say what differs from the original.
    A simulated run is simulated again (only --out applies)."""
    meta = saved.read_meta_or_empty(run_dir)  # none, or not JSON: rerun's reading says so
    if saved.is_simulated(meta):
        ctx = click.get_current_context()
        typed = [name for name in options if name not in ("out", "quiet")
                 and ctx.get_parameter_source(name) is ParameterSource.COMMANDLINE]
        if typed:
            raise click.BadParameter(
                f"{run_dir} is a simulated run: it is simulated again as recorded, so only --out "
                f"applies (drop --{typed[0].replace('_', '-')})", param_hint="RUN_DIR")
        rerun_simulated(run_dir, meta, options["out"])  # type: ignore[arg-type]
        return
    rerun(run_dir, options)


cli.add_command(simulate_command)


def _terminate(signum: int, frame: object) -> None:
    """SIGTERM stops a launch like Ctrl-C: the embedded stack is torn down on the way out."""
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> None:
    """Entry point: click without its multi-line usage errors and without tracebacks."""
    signal.signal(signal.SIGTERM, _terminate)
    args = sys.argv[1:] if argv is None else list(argv)
    try:  # the command line as typed goes into run.json's manifest (credentials masked)
        code = cli.main(args=args, prog_name="coordinator", standalone_mode=False,
                        obj={"argv": ["coordinator", *args]})
    except click.UsageError as exc:
        where = exc.ctx.command_path if exc.ctx else "coordinator"
        click.echo(f"{where}: error: {exc.format_message()}", err=True)
        sys.exit(EXIT_BAD_INPUT)
    except click.ClickException as exc:  # not bad input: e.g. a missing optional package, exit 1
        click.echo(f"coordinator: {exc.format_message()}", err=True)
        sys.exit(exc.exit_code)
    except click.Abort:  # click's form of KeyboardInterrupt (Ctrl-C, or SIGTERM above)
        click.echo("coordinator: interrupted; completed trials are kept", err=True)
        sys.exit(EXIT_INTERRUPTED)
    except RunFailed as exc:
        click.echo(f"coordinator: run failed: {exc}", err=True)
        sys.exit(EXIT_FAILED)
    except WorkersLost as exc:
        click.echo(f"coordinator: {exc}", err=True)
        sys.exit(EXIT_WORKER_LOST)
    except KeyboardInterrupt:
        click.echo("\ncoordinator: interrupted; completed trials are kept", err=True)
        sys.exit(EXIT_INTERRUPTED)
    sys.exit(code if isinstance(code, int) else 0)
