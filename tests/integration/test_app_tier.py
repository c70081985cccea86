"""The app tier on real services: a granian (WSGI) or a uvicorn (ASGI) of app processes serving a
published trial over HTTP, each origin call an ``app`` row on the trial's stream, the count
PostgreSQL's own."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow.compute as pc
import pytest
import redis
import urllib3

from coordinator.app_tier.tier import AppTier, AppTierError
from coordinator.origin.counters import origin_db_calls
from coordinator.stack.app_servers import start_app_tier
from model import apptier
from model.apptier import AppTrialSpec, Header
from model.services import Services
from model.wire import TrialSpec
from tests.helpers import sent_rows, trial_spec

PROCESSES, THREADS = 2, 8


@pytest.fixture(scope="module")
def services(redis_server: Callable[[str], str], postgres_dsn: str) -> Services:
    return Services(redis_server("cache"), redis_server("lock-store"), redis_server("broker"),
                    postgres_dsn)


@pytest.fixture(scope="module", params=apptier.APP_KINDS)
def tier(request: pytest.FixtureRequest, services: Services,
         tmp_path_factory: pytest.TempPathFactory) -> Iterator[AppTier]:
    """The tier of each app kind: granian's WSGI threads, uvicorn's event loops (app/asgi.py)."""
    proc, url = start_app_tier(PROCESSES, THREADS, services, tmp_path_factory.mktemp("app"),
                               kind=request.param)
    broker = redis.Redis.from_url(services.broker_url)
    tier = AppTier(broker, url, PROCESSES)
    try:
        deadline = time.monotonic() + 30
        # just this tier's processes: the other kind's, stopped, beat on for up to 2 s
        while any(n.kind != request.param for n in tier.wait(30, lambda _: None, exact=True)):
            assert time.monotonic() < deadline, tier.nodes
            time.sleep(0.25)
        yield tier
    finally:
        proc.stop()
        broker.close()


def _spec(tier: AppTier, strategy: str, seconds: float, run_id: str,
          params: dict[str, object] | None = None) -> TrialSpec:
    """A trial starting 3 s from now: the processes build it meanwhile. Its run id names the
    tier's kind: a process skips a trial name published before it started (the other kind's)."""
    run_id = f"{run_id}-{tier.nodes[0].kind}"
    spec = trial_spec(THREADS, seconds, run_id=run_id, strategy=strategy, params=params,
                      progress_interval_s=0.1)
    lead = 3 * 10**9
    return TrialSpec(**{**spec.to_json(), "start_ns": spec.start_ns + lead,
                        "end_ns": spec.end_ns + lead})


def _drive(url: str, clients: int, until_ns: int) -> list[urllib3.BaseHTTPResponse]:
    """``clients`` threads, each with its own kept-alive connection, until ``until_ns``."""
    answers: list[urllib3.BaseHTTPResponse] = []
    lock = threading.Lock()

    def client() -> None:
        pool = urllib3.connection_from_url(url, maxsize=1, timeout=5.0, retries=False)
        mine = []
        while time.time_ns() < until_ns and len(mine) < 5_000:  # bounded in time and count
            mine.append(pool.request("GET", url, preload_content=True))
        pool.close()
        with lock:
            answers.extend(mine)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return answers


@pytest.mark.parametrize(("strategy", "params"), [("naive", None),
                                                  ("local-lock", {"distributed": False}),
                                                  ("two-level", None)])
def test_every_origin_call_is_an_app_row_and_postgres_agrees(tier: AppTier, services: Services,
                                                             cache: redis.Redis, strategy: str,
                                                             params: dict[str, object] | None,
                                                             ) -> None:
    """``cache``: flushed first, so that the trial fills (a value another test left under
    ``orders:0`` made every request a hit). local-lock runs on either kind (its core: the
    asgi kind's asyncio driver parks its followers on an asyncio.Event); so does two-level (its
    listener: a thread per WSGI process, an asyncio task per ASGI one)."""
    trial = _spec(tier, strategy, 1.5, f"apptier-{strategy}", params)
    spec = AppTrialSpec(trial, tier.senders(workers=1), threads=THREADS)
    tier.publish(spec)
    before = origin_db_calls(services.origin_dsn)
    url = tier.url + apptier.trial_path(trial.run_id, trial.trial) + "orders:0"
    answers = _drive(url, 12, time.time_ns() + 1_500_000_000)  # however long the build took
    tier.finish(trial.run_id, trial.trial)
    rows = sent_rows(services.broker_url, trial, ended=spec.senders.values())  # polled, shipped
    after = origin_db_calls(services.origin_dsn)
    assert {a.status for a in answers} == {200}
    outcomes = [a.headers[Header.OUTCOME] for a in answers]
    assert set(outcomes) <= {"hit", "filled", "waited"} and "filled" in outcomes
    assert {a.headers[Header.APP] for a in answers} == set(spec.senders)  # both processes served
    assert set(rows["op"].to_pylist()) == {"app"}
    calls = pc.sum(rows["origin_called"]).as_py()
    assert calls == outcomes.count("filled") == after - before  # one row per call, none twice
    assert set(rows["client"].to_pylist()) == {-(n + 2) for n in spec.senders.values()}


def test_a_trial_that_cannot_be_built_is_refused_with_the_processes_word(tier: AppTier) -> None:
    trial = _spec(tier, "naive", 1.0, "apptier-bad")
    bad = TrialSpec(**{**trial.to_json(), "keys": ["orders:0"], "pool_size": 1,
                       "workload": {"no": "such"}})
    with pytest.raises(AppTierError, match=r"app process app@.*workload"):
        tier.publish(AppTrialSpec(bad, tier.senders(workers=1), threads=THREADS), timeout_s=10)


def test_a_request_outside_the_published_trial_is_a_503_and_unknown_keys_a_404(
        tier: AppTier) -> None:
    trial = _spec(tier, "naive", 0.5, "apptier-keys")
    tier.publish(AppTrialSpec(trial, tier.senders(workers=1), threads=THREADS))
    http = urllib3.PoolManager(retries=False, timeout=5.0)
    base = tier.url + apptier.trial_path(trial.run_id, trial.trial)
    assert http.request("GET", base + "orders:0").status == 200
    assert http.request("GET", base + "no-such-key").status == 404
    other = tier.url + apptier.trial_path(trial.run_id, trial.trial + 1) + "orders:0"
    assert http.request("GET", other).status == 503
    assert http.request("GET", tier.url + apptier.FLOOR_PATH).status == 204
    tier.finish(trial.run_id, trial.trial)


def test_the_tier_waits_for_its_processes_and_says_how_many_answered(
        services: Services, tmp_path: Path) -> None:
    broker = redis.Redis.from_url(services.broker_url)
    ghost = AppTier(broker, "http://127.0.0.1:1", PROCESSES + 10)
    with pytest.raises(AppTierError, match=rf"of {PROCESSES + 10} app processes answered"):
        ghost.wait(1.0, lambda _: None)
    broker.close()



@pytest.mark.parametrize("tier", ["asgi"], indirect=True)  # the wsgi kind refuses it at launch
def test_an_asyncio_library_runs_in_the_asgi_tier_and_each_call_is_a_row(
        tier: AppTier, services: Services, cache: redis.Redis) -> None:
    """cashews through its own decorator and client in each uvicorn process (primed by nobody:
    the first requests fill), every call an app row, PostgreSQL agreeing."""
    trial = _spec(tier, "cashews", 1.5, "apptier-cashews")
    spec = AppTrialSpec(trial, tier.senders(workers=1), threads=THREADS)
    tier.publish(spec)
    before = origin_db_calls(services.origin_dsn)
    url = tier.url + apptier.trial_path(trial.run_id, trial.trial) + "orders:0"
    answers = _drive(url, 12, time.time_ns() + 1_500_000_000)
    tier.finish(trial.run_id, trial.trial)
    rows = sent_rows(services.broker_url, trial, ended=spec.senders.values())  # polled, shipped
    after = origin_db_calls(services.origin_dsn)
    assert {a.status for a in answers} == {200}
    outcomes = [a.headers[Header.OUTCOME] for a in answers]
    assert set(outcomes) <= {"hit", "filled", "waited"} and "filled" in outcomes
    calls = pc.sum(rows["origin_called"]).as_py()
    assert 1 <= calls == outcomes.count("filled") == after - before  # one row per call
    assert "waited" in outcomes  # cashews' task per key: the others of a process await its fill
