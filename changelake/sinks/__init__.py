"""Derived systems, each written one micro-batch at a time, idempotently."""
