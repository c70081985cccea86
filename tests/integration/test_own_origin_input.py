"""Your own statement refused before anything starts, by the real database: a DSN without the
statement's table, a statement that writes, a wrong parameter, keys that cannot be read. Exit 2,
one line naming the option, nothing written (tests/unit/test_bad_input.py has the cases that
need no database)."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from tests.helpers import assert_bad_input, run_cli
from tests.own_origin import KEYS_SQL, STATEMENT, own_database, tables


@pytest.fixture(scope="module")
def own_dsn(postgres_dsn: str) -> str:
    dsn = own_database(postgres_dsn, "own_origin_input")
    with psycopg.connect(dsn, autocommit=True) as conn:  # a SELECT whose function writes
        conn.execute("CREATE TABLE own_log (id int)")
        conn.execute("CREATE FUNCTION own_bump(k int) RETURNS int LANGUAGE sql AS "
                     "'INSERT INTO own_log VALUES (k) RETURNING k'")
    return dsn


CASES = [
    (["--origin-sql", "SELECT * FROM own_missing WHERE id = %s", "--keys-sql", KEYS_SQL],
     'relation "own_missing" does not exist'),
    (["--origin-sql", "SELECT own_bump(%s::int)", "--keys-sql", KEYS_SQL],
     "--origin-sql: the statement writes"),
    (["--origin-sql", "SELECT * FROM own_items WHERE id = %s AND body = %s", "--keys-sql", KEYS_SQL],
     "2 placeholders but 1 parameters"),
    (["--origin-sql", "SELECT * FROM own_items WHERE id = 1", "--keys-sql", KEYS_SQL],
     "0 placeholders but 1 parameters"),
    (["--origin-sql", STATEMENT, "--keys-sql", "SELECT nope FROM own_items"],
     'column "nope" does not exist'),
    (["--origin-sql", STATEMENT, "--keys-sql", "SELECT id FROM own_items WHERE false"],
     "--keys-sql: no key"),
    (["--origin-sql", STATEMENT, "--keys-sql", "SELECT id FROM own_items", "--keys", "many:500"],
     "--keys: many:500 asks for 500 keys; --keys-sql gives 200"),
    (["--origin-sql", STATEMENT, "--keys-file", "/nonexistent/keys.txt"],
     "--keys-file: cannot read /nonexistent/keys.txt"),
    (["--origin-sql", STATEMENT, "--keys-sql", KEYS_SQL, "--invalidate-rate", "2", "--write-sql",
      "UPDATE own_nothing SET body = 'y' WHERE id = %s::int"], '--write-sql: the statement cannot run'),
]


@pytest.mark.parametrize(("args", "says"), CASES)
def test_your_statement_refused_by_the_database(args: list[str], says: str, own_dsn: str,
                                                tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    code, err = run_cli(["launch", "--origin-dsn", own_dsn, "--service-timeout", "0",
                         "--out", str(out), *args], capsys)
    assert_bad_input(code, err, says)
    assert not out.exists()
    assert tables(own_dsn) == {"own_items", "own_log"}  # the refusals wrote nothing
    with psycopg.connect(own_dsn) as conn:
        assert conn.execute("SELECT count(*) FROM own_log").fetchone() == (0,)


def test_allow_writes_lets_a_writing_statement_through_the_check(own_dsn: str) -> None:
    """--allow-writes: the same statement passes the read-only check (the launch is not run)."""
    from coordinator.origin.user import try_statement
    from model.custom import CustomOrigin, OriginKind
    try_statement(own_dsn, CustomOrigin(OriginKind.SQL, "SELECT own_bump(%s::int)",
                                        writes_allowed=True), "1")
    with psycopg.connect(own_dsn) as conn:  # tried in a transaction that was rolled back
        assert conn.execute("SELECT count(*) FROM own_log").fetchone() == (0,)
