"""The origin database as the coordinator prepares and watches it: seeding, calibration of the
query cost, and PostgreSQL's own statement counters read around every trial."""
