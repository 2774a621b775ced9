"""Measurements: how fast, how fresh (issue #6 grows this into `changelake bench`)."""
