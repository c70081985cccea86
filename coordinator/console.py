"""What the coordinator tells the person running it: status lines and one live progress line."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Console:
    def __init__(self, stream: TextIO = sys.stderr, quiet: bool = False) -> None:
        self._stream = stream
        self._quiet = quiet
        self._tty = stream.isatty()
        self._live = False
        self._last_plain = 0.0

    def say(self, message: str) -> None:
        if self._quiet:
            return
        self._end_live()
        print(message, file=self._stream, flush=True)

    def progress(self, message: str) -> None:
        """Rewrite one line on a terminal; elsewhere (CI logs) print one line every 2 s."""
        if self._quiet:
            return
        if self._tty:
            self._stream.write("\r\033[K" + message)
            self._stream.flush()
            self._live = True
        elif time.monotonic() - self._last_plain >= 2.0:
            self._last_plain = time.monotonic()
            print(message, file=self._stream, flush=True)

    def _end_live(self) -> None:
        if self._live:
            self._stream.write("\n")
            self._live = False
