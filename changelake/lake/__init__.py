"""The lake's table format, shared by the side that writes it (apply, sinks) and the sides that read
it (query, status, verify): column and path names, the commit metadata every commit carries, the
Delta log read directly, and the merged current rows of a base table and its changelog. See
docs/pipeline.md."""
