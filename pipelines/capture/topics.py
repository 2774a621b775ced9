"""`changelake topics`: what has reached Kafka — counts per change topic and the newest events."""

from __future__ import annotations

import json

from pipelines import kafka_io
from pipelines.capture import connectors
from pipelines.capture.caught_up import wait_caught_up
from pipelines.capture.source import Source, source_of
from pipelines.exceptions import ChangelakeError
from pipelines.settings import Settings

OPS = {"c": "insert", "u": "update", "d": "delete", "r": "snapshot", "t": "truncate"}


def _slots(settings: Settings) -> dict[str, Source]:
    """The replication slots the connector files name (connectors/*.json is their one home),
    each with its source database."""
    slots = {}
    for path in connectors.default_files(settings):
        loaded, _ = connectors.load(path)
        if loaded is not None and "slot.name" in loaded.config:
            slots[loaded.config["slot.name"]] = source_of(settings, loaded.config)
    return slots


def describe(record: kafka_io.Record, width: int = 150) -> str:
    payload = record.payload
    if payload is None:
        text = f"tombstone key={json.dumps(record.key_payload)}"
    elif "status" in payload:  # the transaction-metadata topic: BEGIN / END markers
        count = payload.get("event_count")
        text = f"{payload['status']:<8} txn={payload.get('id')}" + (
            f" events={count}" if count else ""
        )
    else:
        op = OPS.get(str(payload.get("op")), str(payload.get("op")))
        lsn = (payload.get("source") or {}).get("lsn")
        row = payload.get("after") if payload.get("after") is not None else payload.get("before")
        text = f"{op:<8} lsn={lsn} key={json.dumps(record.key_payload)} row={json.dumps(row)}"
    return text if len(text) <= width else text[: width - 1] + "…"


def show(settings: Settings, *, prefix: str, sample: int, wait: bool) -> None:
    if wait:
        for slot, source in _slots(settings).items():
            wait_caught_up(source, slot)
    topics = kafka_io.list_topics(settings.kafka_bootstrap, prefix)
    if not topics:
        raise ChangelakeError(
            f"no topics starting with {prefix!r} on {settings.kafka_bootstrap}",
            "register the connector: `changelake connectors apply`",
        )
    for topic in topics:
        marks = kafka_io.watermarks(settings.kafka_bootstrap, topic)
        count = sum(high - low for low, high in marks.values())
        config = kafka_io.topic_config(settings.kafka_bootstrap, topic)
        print(f"{topic}  ({count} records, cleanup.policy={config.get('cleanup.policy')})")
        start = {p: max(low, high - sample) for p, (low, high) in marks.items()}
        for record in kafka_io.read(settings.kafka_bootstrap, topic, start):
            print(f"  @{record.offset:<7} {describe(record)}")
