"""Benchmarks: speed and memory targets live here, not in timed unit tests. Run ``python -m bench``."""
