"""The read side: query, status, verify and reindex read the derived tables."""
