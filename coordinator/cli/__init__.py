"""The command line: commands, options and presets; ``launch`` turns options into a run."""

from coordinator.cli.commands import main

__all__ = ["main"]
