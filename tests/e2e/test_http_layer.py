"""The HTTP layer end to end on the embedded stack: clients reach an app tier over HTTP, the
strategies run in its processes, nginx and Varnish stand in front of it; every origin call an
``app`` row, PostgreSQL's own count the same.

Each defence is paired with itself switched off in the same launch: a process-local single flight
against naive (the herd bounded by the processes, then by the clients), nginx with
``use_stale updating`` against nginx without it, Varnish's coalescing against ``return (pass)``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pyarrow.dataset as ds

from results.store import rundir
from tests.helpers import coordinator

SMALL = ("--workers", "2", "--clients", "40", "--ttl", "1", "--seconds", "7", "--scale", "50000",
         "--app-threads", "16")


def launch(out: Path, *args: str) -> dict[str, dict[str, Any]]:
    proc = coordinator("launch", "--out", str(out), "--quiet", *SMALL, *args, timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {t["strategy"]: t for t in rundir.read_trials(out).to_pylist()}


def requests(out: Path) -> Any:
    return ds.dataset(out / "requests", format="parquet", partitioning="hive").to_table(
        columns=["trial", "op", "origin_called", "http_status", "cache_status", "outcome"])


def checked(trial: dict[str, Any]) -> dict[str, Any]:
    """Every trial through the tier: PostgreSQL counted what the app rows did, no error."""
    assert trial["db_calls_match"] and trial["db_calls"] == trial["origin_calls_total"] > 0, trial
    assert trial["errors"] == 0, trial["error_types"]
    assert trial["expiry_events"] >= 3, trial
    return trial


def test_a_process_local_single_flight_is_bounded_by_the_app_processes(tmp_path: Path) -> None:
    out = tmp_path / "tier"
    trials = launch(out, "--app-servers", "2", "--strategies", "naive,local-lock:distributed=false")
    naive, local = checked(trials["naive"]), checked(trials["local-lock:distributed=false"])
    assert naive["app_servers"] == local["app_servers"] == 2
    assert local["herd_max"] <= 2, local  # one fill per process, whatever the clients
    assert naive["origin_per_expiry"] > 2 * local["origin_per_expiry"], (naive, local)
    rows = requests(out)
    clients = rows.filter(pc.not_equal(rows["op"], "app"))
    assert pc.sum(clients["origin_called"]).as_py() == 0  # the app's rows count the calls
    assert set(clients["http_status"].to_pylist()) == {200}
    apps = rows.filter(pc.equal(rows["op"], "app"))
    assert pc.sum(apps["origin_called"]).as_py() == sum(t["origin_calls_total"] for t in trials.values())


def test_nginx_serves_stale_while_one_refreshes_and_herds_without(tmp_path: Path) -> None:
    out = tmp_path / "nginx"
    trials = launch(out, "--app-servers", "2", "--strategies",
                    "nginx:lock=on,nginx:lock=on,use_stale=updating,background_update=on")
    plain = checked(trials["nginx:lock=true"])
    stale = checked(trials["nginx:background_update=true,lock=true,use_stale=updating"])
    assert plain["expiry_source"] == stale["expiry_source"] == "front"
    assert stale["origin_per_expiry"] <= 1.5, stale
    assert stale["stale_served"] > 0
    # the lock covers a missing entry only: at an expired one every concurrent request goes up
    assert plain["origin_per_expiry"] >= 3 * stale["origin_per_expiry"], (plain, stale)
    assert plain["front"] == stale["front"] == "nginx"


def test_varnish_coalesces_and_pass_does_not(tmp_path: Path) -> None:
    out = tmp_path / "varnish"
    trials = launch(out, "--app-servers", "2", "--strategies", "varnish:grace_s=0,varnish:coalesce=off")
    coalesced, passed = checked(trials["varnish:grace_s=0"]), trials["varnish:coalesce=false"]
    assert coalesced["origin_per_expiry"] <= 1.5, coalesced
    assert passed["db_calls_match"] and passed["errors"] == 0
    assert passed["origin_calls_total"] > 10 * coalesced["origin_calls_total"], (passed, coalesced)
    assert '"MAIN.busy_sleep"' in coalesced["front_counters"]



def test_asyncio_clients_reach_the_app_tier_over_http(tmp_path: Path) -> None:
    """``--client-driver asyncio`` with an app tier: 200 coroutine clients GET over HTTP, every
    one's rows arrive, and the single flight's bound holds as with threads."""
    out = tmp_path / "aio"
    trials = launch(out, "--app-servers", "2", "--client-driver", "asyncio", "--clients", "200",
                    "--strategies", "naive,local-lock:distributed=false")
    naive, local = checked(trials["naive"]), checked(trials["local-lock:distributed=false"])
    assert naive["client_driver"] == local["client_driver"] == "asyncio"
    assert local["herd_max"] <= 2, local
    assert naive["origin_per_expiry"] > 2 * local["origin_per_expiry"], (naive, local)
    rows = ds.dataset(out / "requests", format="parquet", partitioning="hive").to_table(
        columns=["op", "client", "http_status", "origin_called"])
    clients = rows.filter(pc.not_equal(rows["op"], "app"))
    assert set(clients["http_status"].to_pylist()) == {200}
    assert pc.count_distinct(clients["client"]).as_py() == 200  # every coroutine's rows are here
    assert pc.sum(clients["origin_called"]).as_py() == 0
    for trial in trials.values():
        assert trial["batches_missing"] == trial["rows_dropped"] == 0, trial
