"""``python -m coordinator`` is the ``coordinator`` command."""

from coordinator.cli import main

main()
