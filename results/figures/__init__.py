"""Every figure, computed once: request figures, expiry events and their herds, per-group
figures, consistency, fault windows, self-checks."""
