"""The asyncio app tier end to end (``--app-kind asgi``): uvicorn processes, one event loop
each, running our lock through the asyncio driver and cashews through its own decorator; every
origin call an ``app`` row, PostgreSQL's own count the same.

Each defence is paired with its absence in the same launch: lock against naive (the herd per
event), cashews protected against cashews unprotected (in-process coalescing: the herd bounded
by the app processes, then by the requests in flight).
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.compute as pc

from results.store import rundir
from tests.e2e.test_http_layer import checked, launch, requests

PROCESSES = 2


def test_the_asgi_tier_runs_a_ported_strategy_and_an_async_library(tmp_path: Path) -> None:
    out = tmp_path / "asgi"
    trials = launch(out, "--app-servers", str(PROCESSES), "--app-kind", "asgi", "--strategies",
                    "naive,lock,cashews,cashews:protected=false")
    naive, lock = checked(trials["naive"]), checked(trials["lock"])
    protected, unprotected = checked(trials["cashews"]), checked(trials["cashews:protected=false"])
    assert {t["app_servers"] for t in trials.values()} == {PROCESSES}
    assert lock["origin_per_expiry"] < naive["origin_per_expiry"] / 3, (lock, naive)
    assert lock["waits"] > 0
    assert protected["herd_max"] <= PROCESSES, protected  # one task per key per process
    assert unprotected["origin_per_expiry"] > 2 * protected["origin_per_expiry"], (
        unprotected, protected)
    rows = requests(out)
    clients = rows.filter(pc.not_equal(rows["op"], "app"))
    assert pc.sum(clients["origin_called"]).as_py() == 0  # the app's rows count the calls
    assert set(clients["http_status"].to_pylist()) == {200}
    apps = rows.filter(pc.equal(rows["op"], "app"))
    assert pc.sum(apps["origin_called"]).as_py() == sum(t["origin_calls_total"]
                                                        for t in trials.values())
    run = json.loads((out / "run.json").read_text())
    assert run["manifest"]["options"]["app"]["kind"] == "asgi"
    assert run["app_tier"]["kind"] == "asgi"


def herds_by_process(out: Path, strategy: str, gap_ns: int = 500_000_000) -> list[dict[str, int]]:
    """The app rows' origin calls of ``strategy``, in herds (calls less than ``gap_ns`` apart),
    each as calls per app process."""
    rows = rundir.requests_dataset(out).to_table(
        columns=["worker", "origin_start_ns", "origin_called"],
        filter=(pc.field("strategy") == strategy) & (pc.field("op") == "app")).to_pylist()
    herds: list[dict[str, int]] = []
    last = None
    for row in sorted(rows, key=lambda r: r["origin_start_ns"]):
        if last is None or row["origin_start_ns"] - last > gap_ns:
            herds.append({})
        herds[-1][row["worker"]] = herds[-1].get(row["worker"], 0) + row["origin_called"]
        last = row["origin_start_ns"]
    return herds


def test_the_async_libraries_preset_runs_each_library_where_it_lives(tmp_path: Path) -> None:
    out = tmp_path / "preset"
    trials = launch(out, "--preset", "async-libraries", "--app-servers", str(PROCESSES),
                    "--ttl", "1", "--seconds", "8")
    assert set(trials) == {"lock", "xfetch", "cashews", "cashews:protected=false",
                           "cashews-early", "aiocache-stampede"}
    for trial in trials.values():
        assert trial["db_calls_match"] and trial["origin_calls_total"] > 0, trial
        assert trial["app_servers"] == PROCESSES, trial
    protected, unprotected = trials["cashews"], trials["cashews:protected=false"]
    assert protected["herd_max"] <= PROCESSES, protected
    assert unprotected["origin_per_expiry"] > 2 * protected["origin_per_expiry"], unprotected
    early = trials["cashews-early"]
    assert early["stale_served"] > 0 and early["refreshes"] > 0, early  # refreshed, old served
    # aiocache's cross-process question: in the processes that did not take the lock, do the
    # callers wait? Printed per herd (the answer measured: docs/http.md, README).
    herds = herds_by_process(out, "aiocache-stampede")
    print("aiocache-stampede, origin calls per app process in each herd:", herds)
    assert herds
