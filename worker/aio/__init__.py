"""``--client-driver asyncio``: a worker's clients as coroutines in one event loop (trial),
the clients and their loops (clients), each on a lean asyncio Redis connection (connection)."""
