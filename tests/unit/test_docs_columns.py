"""docs/results.md stays true: every schema column is documented (its examples: tests/e2e)."""

from __future__ import annotations

from typing import Any

import pytest

from results.store.schema import (
    REQUEST_SCHEMA,
    TRIAL_SCHEMA,
)
from results.store.side_tables import (
    COMMAND_SCHEMA,
    EXPIRY_SCHEMA,
    SAMPLE_SCHEMA,
    STATEMENT_SCHEMA,
)
from tests.helpers import ROOT

DOC = ROOT / "docs" / "results.md"


@pytest.mark.parametrize("schema", [REQUEST_SCHEMA, TRIAL_SCHEMA, STATEMENT_SCHEMA, EXPIRY_SCHEMA,
                                    COMMAND_SCHEMA, SAMPLE_SCHEMA],
                         ids=["requests", "trials", "statements", "expiries", "commands", "samples"])
def test_every_column_is_documented(schema: Any) -> None:
    text = DOC.read_text()
    missing = [f.name for f in schema if f"| `{f.name}` | {_type(f.type)} |" not in text]
    assert not missing, f"undocumented columns in docs/results.md: {missing}"


def _type(t: Any) -> str:
    return {"double": "float64"}.get(str(t), str(t))
