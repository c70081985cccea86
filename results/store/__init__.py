"""The run directory on disk: the Parquet schema, the writer and readers, and the rows'
transport from worker to coordinator."""
