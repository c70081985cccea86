"""The counts of a black-box service's origin calls, sampled through each trial on the
coordinator's clock: pg_stat_statements' ``calls`` of the statement, or the service's own
Prometheus counter. One thread per count, each on its own connection opened once for the run, so
a slow metrics page never delays the database's samples (samples.parquet, docs/black-box.md).

A read that fails fails the trial (the run says why): a gap in the samples would move calls to
the wrong herd without a word.
"""

from __future__ import annotations

import re
import threading
import time
from typing import Protocol

import psycopg
import urllib3

from coordinator.blackbox.settings import Count
from coordinator.connect import pg_connect
from coordinator.origin.check import COUNTER_TIMEOUT_S, CounterError, parse_selector
from model.services import mask_url
from results.figures.samples import Samples

STATEMENT_CALLS = ("SELECT coalesce(sum(calls), 0)::bigint FROM pg_stat_statements"
                   " WHERE queryid = ANY(%s)")


class SampleError(RuntimeError):
    """A count could not be read during a trial."""


class CallCount(Protocol):
    """One count of the origin calls, read as often as the sampler asks."""

    source: Count

    def read(self) -> int: ...

    def close(self) -> None: ...


class StatementCount:
    """pg_stat_statements' calls of the statement's query ids, every user and database."""

    source = Count.STATEMENT

    def __init__(self, dsn: str, query_ids: tuple[int, ...]) -> None:
        self._ids = list(query_ids)
        self._conn = pg_connect(dsn, autocommit=True)

    def read(self) -> int:
        row = self._conn.execute(STATEMENT_CALLS, (self._ids,)).fetchone()
        return int(row[0]) if row else 0

    def close(self) -> None:
        self._conn.close()


class CounterCount:
    """The service's Prometheus counter: the sum of the samples the selector names, as
    ``coordinator.origin.check.counter_value`` reads it (which checked the page at the start),
    parsed line by line here: the full parser took 10-20 ms a page on a loaded machine, too
    slow for 100 Hz."""

    source = Count.COUNTER

    def __init__(self, url: str, selector: str) -> None:
        self._url = url
        name, self._labels = parse_selector(selector)
        self._names = (name, f"{name}_total")
        self._pool = urllib3.PoolManager(maxsize=1, timeout=COUNTER_TIMEOUT_S, retries=False)

    def read(self) -> int:
        response = self._pool.request("GET", self._url)
        if response.status != 200:
            raise CounterError(f"{mask_url(self._url)} answered HTTP {response.status}")
        total = 0.0
        for line in response.data.decode("utf-8", "replace").splitlines():
            if line.startswith(self._names) and (found := _sample(line)) is not None:
                name, labels, value = found
                if name in self._names and self._labels.items() <= labels.items():
                    total += value
        return round(total)

    def close(self) -> None:
        self._pool.clear()


_LINE = re.compile(r'^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?\s+(\S+)')
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')


def _sample(line: str) -> tuple[str, dict[str, str], float] | None:
    """``name{a="x"} 12 [timestamp]`` -> (name, labels, 12.0); None for what is not a sample."""
    match = _LINE.match(line)
    if match is None:
        return None
    try:
        value = float(match.group(3))
    except ValueError:
        return None
    return match.group(1), dict(_LABEL.findall(match.group(2) or "")), value


class Sampler:
    """Reads one count ``hz`` times a second from ``start`` to ``stop``, over ``lanes`` (one
    connection each, staggered by a period): a metrics page that takes 15 ms to answer under
    load (a busy Node event loop) is still read at 100 Hz by two lanes."""

    def __init__(self, lanes: list[CallCount], hz: float) -> None:
        self.source = lanes[0].source
        self._lanes, self._period_ns = lanes, round(1e9 / hz)
        self._halt = threading.Event()
        self._rows: list[tuple[int, int, int]] = []  # (midpoint, read duration, value)
        self._error: BaseException | None = None
        self._threads = [threading.Thread(target=self._run, args=(i, count), daemon=True,
                                          name=f"sample-{count.source}-{i}")
                         for i, count in enumerate(lanes)]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def _run(self, lane: int, count: CallCount) -> None:
        period = self._period_ns * len(self._lanes)
        next_ns = time.time_ns() + lane * self._period_ns
        while not self._halt.wait(max(0.0, (next_ns - time.time_ns()) / 1e9)):
            sent = time.time_ns()
            try:
                value = count.read()
            except (psycopg.Error, CounterError, OSError, ValueError) as exc:
                self._error = exc
                return
            got = time.time_ns()
            self._rows.append(((sent + got) // 2, got - sent, value))
            next_ns = max(next_ns + period, got)

    def stop(self) -> tuple[Samples, list[tuple[int, int, int]]]:
        """The trial's samples in time order, and the rows (midpoint, read ns, value) for
        samples.parquet."""
        self._halt.set()
        for thread in self._threads:
            thread.join(timeout=10)
        if self._error is not None:
            raise SampleError(f"reading {self.source} during the trial failed: "
                              f"{type(self._error).__name__}: {self._error}".splitlines()[0][:300])
        rows = sorted(self._rows)
        return Samples(self.source.value, tuple(r[0] for r in rows),
                       tuple(r[2] for r in rows)), rows
