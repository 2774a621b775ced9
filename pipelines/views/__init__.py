"""Views derived from the change stream besides each table's current state (views.json)."""
