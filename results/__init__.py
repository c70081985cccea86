"""Results: the Parquet schema, the run directory, and the analysis of request rows."""
