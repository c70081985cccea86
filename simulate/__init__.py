"""The model room: stampede-lab's strategies run on simulated time (``coordinator simulate``).

A discrete-event model (simpy) of app processes, a cache server, a lock store and an origin,
in which the registered strategies' own cores (``strategies.core``) decide every request:
``driver`` runs them, ``store`` answers their commands, ``world`` builds a trial, ``metrics``
and ``table`` turn replications into the table the tool prints. What it models and what not:
docs/simulate.md.
"""
