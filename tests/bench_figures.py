"""What a benchmark printed, checked: every figure finite and positive, nothing skipped.

A figure is any number in the printed text that stands on its own (not a piece of a word such as
``w1`` or ``x86_64``, nor of a version such as ``2.47.0``). Numbers written with a sign (``+0.45
MB/min``, a slope; ``-3.1 us``, a difference) are changes and only need to be finite; counts
matched by ``zero_ok`` (``held ... in 0 of 5``) may be 0. Words that say a figure is missing
(``nan``, ``inf``, ``n/a``, ``skipped``, ``failed``, ``not installed``) fail the check."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

_NUMBER = re.compile(r"(?<![\w.])([-+]?)(\d[\d,]*(?:\.\d+)?)(?![\w.]*\d)")
MISSING = ("nan", "inf", "n/a", "skipped", "failed", "not installed", "error")


def figures(text: str) -> list[tuple[str, float]]:
    """(sign, value) of every figure in ``text``."""
    return [(m.group(1), float(m.group(2).replace(",", ""))) for m in _NUMBER.finditer(text)]


def assert_figures(text: str, zero_ok: Sequence[str] = (), at_least: int = 1) -> None:
    """Every figure of ``text`` finite and positive (signed ones finite; ``zero_ok`` patterns'
    numbers >= 0), at least ``at_least`` of them, and no word of a missing figure."""
    for word in MISSING:
        found = re.search(rf"(?<![\w-]){re.escape(word)}(?![\w-])", text, re.IGNORECASE)
        assert found is None, f"{word!r} in the benchmark's output:\n{text}"
    allowed = text
    for pattern in zero_ok:
        allowed = re.sub(pattern, lambda m: re.sub(r"\d", "1", m.group(0)), allowed)
    found = figures(allowed)
    assert len(found) >= at_least, f"fewer than {at_least} figures in:\n{text}"
    for sign, value in found:
        assert math.isfinite(value), text
        assert sign or value > 0, f"a figure of 0 in the benchmark's output:\n{text}"
