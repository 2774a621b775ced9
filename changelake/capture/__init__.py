"""Capture: connector files, the Connect API, topics, and what is sent to Debezium."""
