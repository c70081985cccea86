-- Run once by the postgres image on a new data directory: the counter the coordinator
-- cross-checks origin calls against (shared_preload_libraries is set on the command line).
CREATE EXTENSION IF NOT EXISTS pg_stat_statements;
