"""Benchmarks: `make bench` (python -m bench). They print figures, they assert nothing."""
