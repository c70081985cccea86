"""What each granian worker process imports (``app.serve:application``): the WSGI application,
with this process's control thread started at once (its beat, its trials), before any request."""

from app.wsgi import application, start_control

start_control()

__all__ = ["application"]
