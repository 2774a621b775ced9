"""Apply: the streaming run, the snapshot, and each batch into Delta and the index."""
