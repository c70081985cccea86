"""``python -m coordinator`` is the ``coordinator`` command."""

from coordinator.cli import main

if __name__ == "__main__":  # a spawned child (the expiry listener) imports this module too
    main()
