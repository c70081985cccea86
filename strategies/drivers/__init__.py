"""The worlds a strategy's logic (``strategies.core``) runs in: ``sync`` on today's ``Commands``
in client threads, ``aio`` on async commands in an event loop."""
