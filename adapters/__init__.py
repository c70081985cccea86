"""The third-party libraries under test, each behind the strategy contract (strategies.base).

One module per library, each running the library's own documented recipe with the library's
own defaults, through the library's own client; the library calls our loader, so every origin
call is still counted per row and checked against pg_stat_statements. The pure strategies never
import a library: these classes are found through the ``stampede_lab.strategies`` entry points
(pyproject.toml) and imported only when a spec names them, so a missing library is one line.
Install them with ``pip install 'stampede-lab[libraries]'``. docs/strategies.md says, per
library, how each outcome is recognised and what cannot be seen. The asyncio libraries (cashews,
aiocache) are in ``adapters/aio``, behind an async contract and an entry-point group of their own.
"""
