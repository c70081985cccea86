"""A worker's beat comes from a process of its own (worker.heartbeat, issue 25): it keeps coming
while the worker's threads hold the GIL, stops while the worker is stopped, and ends with it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import redis

from model.wire import alive_key, beat_sent
from worker import heartbeat

NODE = "beat@test"
# The worker stand-in: starts its beater as Celery's worker_ready does, then 25 threads spin in
# pure Python (each holds the GIL until the interpreter takes it away), as two-level's clients do.
WORKER = """
import sys, threading
from worker import heartbeat
heartbeat.start({node!r}, {url!r})
heartbeat.publish(1_700_000_000_000_000_000, 1234, 10**9)  # 1,234 sent in that trial's first second
def spin():
    n = 0
    while True:
        n += 1
for _ in range(25):
    threading.Thread(target=spin, daemon=True).start()
threading.Event().wait()
"""


def beat_number(client: redis.Redis) -> int:
    value = client.get(alive_key(NODE))
    return int(value.split()[0]) if value else 0


def numbers_for(client: redis.Redis, seconds: float) -> list[int]:
    seen, deadline = [], time.monotonic() + seconds
    while time.monotonic() < deadline:
        seen.append(beat_number(client))
        time.sleep(0.1)
    return seen


def longest_silence_s(client: redis.Redis, seconds: float) -> float:
    """The longest time the beat number stood still over ``seconds``."""
    last, since, longest = beat_number(client), time.monotonic(), 0.0
    deadline = since + seconds
    while time.monotonic() < deadline:
        now = beat_number(client)
        if now != last:
            longest, last, since = max(longest, time.monotonic() - since), now, time.monotonic()
        time.sleep(0.02)
    return max(longest, time.monotonic() - since)


@pytest.fixture
def busy_worker(redis_server: Callable[[str], str], tmp_path: Path):  # type: ignore[no-untyped-def]
    url = redis_server("broker")
    client = redis.Redis.from_url(url)
    client.delete(alive_key(NODE))
    env = {**os.environ, "STAMPEDE_HEALTH_FILE": str(tmp_path / "alive")}
    proc = subprocess.Popen([sys.executable, "-c", WORKER.format(node=NODE, url=url)], env=env)
    try:
        deadline = time.monotonic() + 20
        while not beat_number(client) and time.monotonic() < deadline:
            time.sleep(0.05)
        yield proc, client, tmp_path / "alive"
    finally:
        proc.kill()
        proc.wait(5)
        client.close()


# The beater sets a new number every 0.25 s. A beat thread inside the same 25-spinner process,
# tried once (2026-12-01, this machine, other tests running): 1.13 s of silence in 4 s, and the
# Celery heartbeat of before (several GIL hand-offs per beat) stood still for 5.2 s.
SILENCE_BOUND_S = 0.8


def test_a_worker_whose_threads_hold_the_gil_still_beats(busy_worker) -> None:  # type: ignore[no-untyped-def]
    _, client, health = busy_worker
    silence = longest_silence_s(client, 4.0)
    assert silence < SILENCE_BOUND_S, (
        f"the beat stood still for {silence:.2f} s while the worker was busy")
    assert health.stat().st_mtime > time.time() - 1.0  # the container probe's file too


def test_a_stopped_worker_is_silent_and_beats_again_when_continued(busy_worker) -> None:  # type: ignore[no-untyped-def]
    proc, client, _ = busy_worker
    os.kill(proc.pid, signal.SIGSTOP)
    try:
        time.sleep(0.5)  # a beat under way may still land
        still = numbers_for(client, 1.5)
        assert len(set(still)) == 1, f"beats while stopped: {still}"
    finally:
        os.kill(proc.pid, signal.SIGCONT)
    assert len(set(numbers_for(client, 1.0))) > 1


def test_the_beat_carries_what_the_worker_sent(busy_worker) -> None:  # type: ignore[no-untyped-def]
    """The worker's count reaches the broker in its beater's beat (the progress line's rate)."""
    _, client, _ = busy_worker
    beat = client.get(alive_key(NODE))
    assert beat_sent(beat, 1_700_000_000_000_000_000) == (1234, 10**9), beat
    assert beat_sent(beat, 1_700_000_001_000_000_000) is None  # another trial's is not this one's


def test_the_beater_ends_with_its_worker(busy_worker) -> None:  # type: ignore[no-untyped-def]
    proc, client, _ = busy_worker
    found = [d / f"stampede-sent-{proc.pid}" for d in (Path("/dev/shm"), Path(tempfile.gettempdir()))]
    (count_file,) = [f for f in found if f.exists()]  # the worker's count, beside its beater
    beaters = [int(p) for p in subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True,
                                              text=True, check=False).stdout.split()]
    assert len(beaters) == 1
    proc.kill()
    proc.wait(5)
    deadline = time.monotonic() + 3
    while heartbeat.state(beaters[0]) not in (None, "Z") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert heartbeat.state(beaters[0]) in (None, "Z")
    assert not count_file.exists()  # the count went with the beater
    last = beat_number(client)
    time.sleep(0.6)
    assert beat_number(client) == last


def test_a_terminated_beater_takes_its_count_and_a_dead_workers_count_is_swept(
        redis_server: Callable[[str], str]) -> None:
    """The worker's shutdown terminates its beater (SIGTERM): the count's file goes with it; a
    file left by a worker and beater both SIGKILLed is removed by the next worker's start."""
    dead = 4_194_000  # above the usual pid_max: no such process
    count = heartbeat.SentCount.beside(os.getpid())
    stale = count.path.with_name(f"{heartbeat.PREFIX}{dead}")
    stale.write_bytes(bytes(heartbeat.SENT.size))
    try:
        url = redis_server("broker")
        client = redis.Redis.from_url(url)
        client.delete(alive_key("sweep@test"))
        beater = subprocess.Popen([sys.executable, "-m", "worker.heartbeat", "--parent",
                                   str(os.getpid()), "--node", "sweep@test", "--sent",
                                   str(count.path)], env={**os.environ, "STAMPEDE_BROKER_URL": url})
        deadline = time.monotonic() + 20
        while client.get(alive_key("sweep@test")) is None and time.monotonic() < deadline:
            time.sleep(0.05)  # beating: its SIGTERM handler is in place
        client.close()
        beater.terminate()
        beater.wait(5)
        assert not count.path.exists()
        assert heartbeat.SentCount.beside(os.getpid()).path == count.path
        assert not stale.exists()
    finally:
        stale.unlink(missing_ok=True)
        count.path.unlink(missing_ok=True)
