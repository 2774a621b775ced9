"""changelake: Postgres → Debezium → Kafka → Delta Lake and OpenSearch, kept exactly in step."""

__version__ = "0.1.0"
