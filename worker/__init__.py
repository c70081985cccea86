"""Worker: a Celery task that runs one trial's client threads on this host."""
