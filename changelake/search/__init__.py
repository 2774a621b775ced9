"""The search side: which tables are indexed, how documents are written, how they are found."""
