"""The app tier from the coordinator's side: its processes waited for, each trial published to
them and finished, their clocks, and the HTTP caches in front (docs/http.md)."""
