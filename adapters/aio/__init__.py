"""The asyncio libraries under test (cashews, aiocache), each behind the async strategy contract
(adapters.aio.base), through the library's own documented decorator with its own defaults.

The library calls our loader as the decorated function, so every origin call goes through
``AsyncDeps.loader`` and is counted. These classes come in through their own entry-point group,
``stampede_lab.async_strategies`` (pyproject.toml, adapters.aio.registry), never the threaded
workers' one: until an asyncio driver hosts them the CLI refuses their names with one line.
Install them with ``pip install 'stampede-lab[async-libraries]'``. docs/strategies.md says, per
library, how each outcome is recognised and what cannot be seen.
"""
