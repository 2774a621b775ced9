"""Reading change topics directly: offsets, bounded reads, and Debezium's JSON envelope."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

from confluent_kafka import (
    TIMESTAMP_NOT_AVAILABLE,
    Consumer,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient

from changelake import kafka_security
from changelake.exceptions import RetryableError

WATERMARKS_RETRY_S = 15.0  # how long a leaderless partition (a topic just made) is waited for


@dataclass(frozen=True)
class Record:
    topic: str
    partition: int
    offset: int
    key: Any
    value: Any  # None for a tombstone
    headers: dict[str, bytes]
    timestamp_ms: int | None = None  # when it was produced

    @property
    def payload(self) -> dict[str, Any] | None:
        """The envelope's payload (op, before, after, source), or None for a tombstone."""
        if not isinstance(self.value, dict):
            return None
        payload = self.value.get("payload") if "payload" in self.value else self.value
        return payload if isinstance(payload, dict) else None

    @property
    def key_payload(self) -> Any:
        return (
            self.key.get("payload")
            if isinstance(self.key, dict) and "payload" in self.key
            else self.key
        )


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "log_level": 0, **_security()})


def _security() -> dict[str, str]:
    """TLS and SASL for every client, as the environment sets them (kafka_security.py)."""
    return kafka_security.from_env().librdkafka()


def list_topics(bootstrap: str, prefix: str = "") -> list[str]:
    try:
        metadata = admin(bootstrap).list_topics(timeout=10)
    except KafkaException as exc:
        raise RetryableError(
            f"Kafka is not reachable at {bootstrap} ({exc})", "start it with `changelake stack up`"
        ) from exc
    return sorted(t for t in metadata.topics if t.startswith(prefix))


def _consumer(bootstrap: str) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"changelake-reader-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "log_level": 0,
            **_security(),
        }
    )


def watermarks(bootstrap: str, topic: str) -> dict[int, tuple[int, int]]:
    """(low, high) offsets per partition. A topic created a moment ago may have no partition
    leader yet ("Not leader for partition"): retriable errors are tried again for a while."""
    deadline = time.monotonic() + WATERMARKS_RETRY_S
    while True:
        try:
            return _watermarks(bootstrap, topic)
        except KafkaException as exc:
            if not exc.args[0].retriable() or time.monotonic() >= deadline:
                raise
            time.sleep(0.5)


def _watermarks(bootstrap: str, topic: str) -> dict[int, tuple[int, int]]:
    consumer = _consumer(bootstrap)
    try:
        parts = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10) for p in parts
        }
    finally:
        consumer.close()


def read(
    bootstrap: str,
    topic: str,
    start: dict[int, int] | None = None,
    timeout_s: float = 30.0,
    raw: bool = False,
) -> Iterator[Record]:
    """Every record from `start` (default: the beginning) up to the end offsets taken now;
    keys and values parsed as JSON, or with `raw` as the bytes Kafka holds."""
    marks = watermarks(bootstrap, topic)
    begin = {p: (start or {}).get(p, low) for p, (low, _) in marks.items()}
    pending = {p for p, (_, high) in marks.items() if begin[p] < high}
    if not pending:
        return
    consumer = _consumer(bootstrap)
    try:
        consumer.assign([TopicPartition(topic, p, begin[p]) for p in pending])
        yield from _drain(consumer, marks, pending, timeout_s, _bytes if raw else _json)
    finally:
        consumer.close()


def _drain(
    consumer: Consumer,
    marks: dict[int, tuple[int, int]],
    pending: set[int],
    timeout_s: float,
    parse: Callable[[str | bytes | None], Any],
) -> Iterator[Record]:
    deadline = time.monotonic() + timeout_s
    while pending:
        if time.monotonic() > deadline:
            raise RetryableError(
                f"partitions {sorted(pending)} were not read to their end in {timeout_s:.0f}s"
            )
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        if msg.error():
            raise RetryableError(f"Kafka read error: {msg.error()}")
        partition, offset = int(msg.partition() or 0), int(msg.offset() or 0)
        if offset >= marks[partition][1] - 1:
            pending.discard(partition)
        if offset < marks[partition][1]:
            yield Record(
                topic=str(msg.topic()),
                partition=partition,
                offset=offset,
                key=parse(msg.key()),
                value=parse(msg.value()),
                headers=_headers(msg.headers()),
                timestamp_ms=_timestamp(msg),
            )


def _timestamp(msg: Message) -> int | None:
    kind, at = msg.timestamp()
    return int(at) if kind != TIMESTAMP_NOT_AVAILABLE else None


def _json(raw: str | bytes | None) -> Any:
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw


def _bytes(raw: str | bytes | None) -> bytes | None:
    return raw.encode() if isinstance(raw, str) else raw


def _headers(raw: Any) -> dict[str, bytes]:
    """A record's headers by name; of a name given twice, the first (as the decoder reads it)."""
    pairs = raw.items() if isinstance(raw, dict) else (raw or [])
    found: dict[str, bytes] = {}
    for k, v in pairs:
        if isinstance(v, bytes):
            found.setdefault(str(k), v)
    return found


def topic_config(bootstrap: str, topic: str) -> dict[str, str]:
    from confluent_kafka.admin import ConfigResource  # type: ignore[attr-defined]

    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    client = admin(bootstrap)  # must outlive the future, or librdkafka destroys the handle
    future = client.describe_configs([resource])[resource]
    return {name: entry.value for name, entry in future.result(timeout=10).items()}


def set_topic_config(bootstrap: str, topic: str, values: dict[str, str]) -> None:
    """Set these configs on an existing topic, leaving its others alone."""
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
    )

    entries = [
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
        for name, value in values.items()
    ]
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=entries)
    client = admin(bootstrap)
    for future in client.incremental_alter_configs([resource]).values():
        future.result(timeout=30)


def delete_topics(bootstrap: str, topics: list[str]) -> None:
    if not topics:
        return
    client = admin(bootstrap)
    # Kafka refuses a request naming a topic twice (INVALID_REQUEST), so callers may overlap.
    for future in client.delete_topics(sorted(set(topics))).values():
        future.result(timeout=30)


class RawRecord(NamedTuple):
    key: bytes | None
    value: bytes | None
    headers: dict[str, bytes]
    timestamp_ms: int | None = None  # when it was produced (Connect: as Debezium read it)


def fetch_one(
    bootstrap: str, topic: str, partition: int, offset: int, timeout_s: float = 30.0
) -> RawRecord:
    """One record as Kafka holds it."""
    consumer = _consumer(bootstrap)
    try:
        consumer.assign([TopicPartition(topic, partition, offset)])
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                raise RetryableError(f"Kafka read error on {topic}: {msg.error()}")
            if msg.offset() != offset:  # compacted away since it was read: never another's
                raise RetryableError(f"{topic} partition {partition} offset {offset} is gone")
            return RawRecord(
                _bytes(msg.key()), _bytes(msg.value()), _headers(msg.headers()), _timestamp(msg)
            )
        raise RetryableError(f"{topic} partition {partition} offset {offset} not read in time")
    finally:
        consumer.close()


def keys_after(
    bootstrap: str, topic: str, partition: int, offset: int, count: int, wait_s: float
) -> list[Any]:
    """The keys (their payloads) of up to `count` records after `offset`, as many as arrive
    within `wait_s`; a tombstone's key counts too."""
    consumer = _consumer(bootstrap)
    keys: list[Any] = []
    try:
        consumer.assign([TopicPartition(topic, partition, offset + 1)])
        deadline = time.monotonic() + wait_s
        while len(keys) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                raise RetryableError(f"Kafka read error on {topic}: {msg.error()}")
            record = Record(
                str(msg.topic()), partition, int(msg.offset() or 0), _json(msg.key()), None, {}
            )
            keys.append(record.key_payload)
    finally:
        consumer.close()
    return keys


def produce(
    bootstrap: str,
    topic: str,
    records: list[tuple[int, bytes, bytes | None, dict[str, bytes]]],
    timeout_s: float = 60.0,
) -> None:
    """Write (partition, key, value, headers) records to `topic` (a None value: a tombstone),
    in order, each acknowledged by the broker before this returns."""
    if not records:
        return
    producer = Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "log_level": 0, **_security()}
    )
    failed: list[str] = []

    def done(err: Any, _msg: Message) -> None:
        if err is not None:
            failed.append(str(err))

    for partition, key, value, headers in records:
        producer.produce(
            topic, value, key, partition, on_delivery=done, headers=list(headers.items())
        )
    left = producer.flush(timeout_s)
    if failed or left:
        raise RetryableError(
            f"Kafka: {len(failed) + left} of {len(records)} records not written to {topic}"
            + (f" ({failed[0]})" if failed else "")
        )
