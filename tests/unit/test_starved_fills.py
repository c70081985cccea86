"""A trial whose own load kept its fillers off the CPU says so under the table (issue 25)."""

from __future__ import annotations

from typing import Any

from results.outputs import table

BASE: dict[str, Any] = {"trial": 1, "strategy": "two-level", "below_floor": False,
                        "db_calls_match": True, "errors": 0, "db_calls": 10, "db_time_ms": 20.0}


def test_fills_far_slower_on_the_client_than_in_postgres_are_starved() -> None:
    notes = table.notes([{**BASE, "origin_call_p50_ms": 180.0}])  # 2 ms in PostgreSQL
    assert any("fills starved: an origin call took 180.0 ms on the client" in n for n in notes)


def test_fills_as_fast_as_the_query_are_not() -> None:
    for client_ms in (3.0, 15.0):  # under the 5 ms floor; under 10 x the database's 2 ms
        notes = table.notes([{**BASE, "origin_call_p50_ms": client_ms}])
        assert not any("starved" in n for n in notes), notes
    assert not any("starved" in n for n in table.notes([BASE]))  # runs made before the column
