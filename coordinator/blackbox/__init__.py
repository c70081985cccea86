"""Your running service as a black box (issue 33): driven over HTTP, its origin calls sampled
where they happen, its cache's expiries observed or made by the tool (docs/black-box.md)."""
