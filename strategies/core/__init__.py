"""Every strategy's request logic, written once, with no I/O (sans-IO, the h11 way).

A core is a generator of effects (``strategies.core.effects``) plus, for cache-aside cores, a
plain ``hit`` for the first reply; the drivers (``strategies.drivers``: threads, asyncio) and the
tests' scripted scheduler execute them. The logic reads time only through an injected ``Clock``
and never sleeps, blocks or starts anything itself, so a simulated clock can drive it too.
"""
