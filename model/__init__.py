"""The model both sides share: workload, services and connections, origin SQL, the wire contract.

The coordinator and the worker import from here and not from each other; nothing here knows Celery.
"""
