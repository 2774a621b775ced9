"""The read side: `query`, `status`, `export` and reads as of a point read the derived tables."""
