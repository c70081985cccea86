"""HTTP as the client threads speak it (issue 32): the target, the keep-alive connection, the
response and its cache status. ``model.http.origin`` is the other side: an HTTP service as the
origin, behind a bounded pool."""
