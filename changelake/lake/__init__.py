"""The lake's table format, shared by the side that writes it (apply, sinks) and the sides that read
it (query, status, verify): column and path names, the commit metadata every commit carries, the
Delta log read directly, and a table read at one version. See docs/pipeline.md."""
