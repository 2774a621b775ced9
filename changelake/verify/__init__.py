"""`changelake verify`: the derived tables and indexes equal the source, key range by range."""
