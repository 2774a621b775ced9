"""`changelake topics`: what has reached Kafka — counts per change topic and the newest events."""

from __future__ import annotations

import json

from changelake import kafka_io
from changelake.capture import connectors
from changelake.capture.caught_up import wait_caught_up
from changelake.capture.source import Source, source_of
from changelake.exceptions import ChangelakeError
from changelake.settings import Settings

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


def _prefixes(settings: Settings) -> list[str]:
    """Each connector file's topic prefix, with the dot its tables' topics follow it with."""
    prefixes = set()
    for path in connectors.default_files(settings):
        loaded, _ = connectors.load(path)
        if loaded is not None and loaded.config.get("topic.prefix"):
            prefixes.add(loaded.config["topic.prefix"] + ".")
    return sorted(prefixes)


def show(
    settings: Settings, *, prefix: str | None, sample: int, wait: bool, as_json: bool = False
) -> None:
    """Each topic starting with `prefix` (None: any of the project's connector files' prefixes):
    its records and cleanup policy, and its newest `sample` records."""
    if wait:
        for slot, source in _slots(settings).items():
            wait_caught_up(source, slot)
    prefixes = [prefix] if prefix is not None else _prefixes(settings)
    bootstrap = settings.kafka_bootstrap
    topics = sorted({t for p in prefixes for t in kafka_io.list_topics(bootstrap, p)})
    if not topics:
        raise ChangelakeError(
            f"no topics starting with {' or '.join(map(repr, prefixes)) or 'a topic.prefix of '}"
            f"{'' if prefixes else 'the connector files'} on {bootstrap}",
            "register the connector: `changelake connectors apply`",
        )
    shown = []
    for topic in topics:
        marks = kafka_io.watermarks(bootstrap, topic)
        start = {p: max(low, high - sample) for p, (low, high) in marks.items()}
        records = sum(high - low for low, high in marks.values())
        policy = kafka_io.topic_config(bootstrap, topic).get("cleanup.policy")
        shown.append((topic, records, policy, list(kafka_io.read(bootstrap, topic, start))))
    if as_json:
        doc = [
            {
                "topic": topic,
                "records": records,
                "cleanup_policy": policy,
                "newest": [
                    {"partition": r.partition, "offset": r.offset, "key": r.key, "value": r.value}
                    for r in newest
                ],
            }
            for topic, records, policy, newest in shown
        ]
        print(json.dumps(doc, indent=2, default=str))
        return
    for topic, records, policy, newest in shown:
        print(f"{topic}  ({records} records, cleanup.policy={policy})")
        for record in newest:
            print(f"  @{record.offset:<7} {describe(record)}")
