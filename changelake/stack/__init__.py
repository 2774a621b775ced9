"""The local stack: one module per service (install check, start, health, stop)."""
