"""Schemas by fingerprint, from the compacted topic our Connect converter publishes them to.

`dev.changelake.connect.LeanJsonConverter` (connect-smt/) writes each event as its payload alone,
with its schema's fingerprint in the `changelake.schema` header, and each schema once to the
schemas topic, keyed by fingerprint, before the first event that uses it. So a fingerprint read
from an event is normally found by reading the topic to its end; one that is not (the topic
deleted, or written by a converter pointed at another topic) is waited for, boundedly, and then
reported, so its events become dead letters naming it rather than stopping anything.
"""

from __future__ import annotations

import functools
import threading

from changelake import kafka_io
from changelake.waiting import wait_until

SCHEMA_HEADER = "changelake.schema"  # LeanJsonConverter.HEADER
DEFAULT_TOPIC = "changelake.schemas"  # LeanJsonConverter's schemas.topic default
TOPIC_SETTING = "value.converter.schemas.topic"  # in a connector's config
POLL_S = 0.5


class SchemaRegistry:
    """The schemas topic's contents, read incrementally; safe to share between threads."""

    def __init__(self, bootstrap: str, topic: str, wait_s: float):
        self.bootstrap, self.topic, self.wait_s = bootstrap, topic, wait_s
        self._schemas: dict[str, str] = {}
        self._next: dict[int, int] = {}  # per partition, the first offset not read yet
        self._lock = threading.Lock()

    def schema(self, fingerprint: str) -> str | None:
        """The schema's JSON text (JsonConverter's form), or None if it did not appear within
        the wait."""

        def found() -> bool:
            with self._lock:  # not held while waiting: other tables' lookups go on
                if fingerprint not in self._schemas:
                    self._read_new()
                return fingerprint in self._schemas

        wait_until(found, self.wait_s, interval_s=POLL_S)
        return self._schemas.get(fingerprint)

    def missing(self, fingerprint: str) -> str:
        """Why an event with this fingerprint cannot be decoded (its dead letter's reason)."""
        return (
            f"unknown schema fingerprint {fingerprint}: not in topic {self.topic} after "
            f"{self.wait_s:.0f}s (was the topic deleted, or does the connector's "
            f"{TOPIC_SETTING} name another?)"
        )

    def _read_new(self) -> None:
        if self.topic not in kafka_io.list_topics(self.bootstrap, self.topic):
            return
        for partition, (low, high) in kafka_io.watermarks(self.bootstrap, self.topic).items():
            if self._next.get(partition, 0) > high:  # the topic was made anew: read it afresh
                self._next[partition] = low
        for record in kafka_io.read(self.bootstrap, self.topic, dict(self._next), raw=True):
            self._next[record.partition] = record.offset + 1
            if isinstance(record.key, bytes) and isinstance(record.value, bytes):
                self._schemas[record.key.decode("ascii", "replace")] = record.value.decode()


@functools.cache
def registry(bootstrap: str, topic: str, wait_s: float) -> SchemaRegistry:
    """One per schemas topic in a process: every table of every stream shares what it read."""
    return SchemaRegistry(bootstrap, topic, wait_s)
