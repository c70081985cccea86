"""Coordinator: plans an experiment, starts or finds the services, dispatches, gathers, reports."""
