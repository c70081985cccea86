"""An error row says what failed, and what caused it when a library wraps the real failure."""

from __future__ import annotations

from strategies.base import error_text


class WrappedError(Exception):
    pass


def test_a_wrapped_failure_names_its_cause() -> None:
    try:
        try:
            raise TimeoutError("timed out")
        except TimeoutError as exc:
            raise WrappedError("Memcache error") from exc
    except WrappedError as exc:
        assert error_text(exc) == "WrappedError: Memcache error (from TimeoutError: timed out)"


def test_a_plain_failure_is_its_type_and_message_cut_at_200() -> None:
    assert error_text(ValueError("x" * 300)) == ("ValueError: " + "x" * 300)[:200]
    assert error_text(KeyError("k")) == "KeyError: 'k'"
