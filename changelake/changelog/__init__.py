"""Debezium's change events, decoded: pure functions from Kafka records to typed change rows."""
