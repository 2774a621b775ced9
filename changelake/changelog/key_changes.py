"""Primary-key updates whose new row never reached the topic.

Debezium turns an UPDATE of a row's key into three records at one LSN: a delete of the old key
(header `__debezium.newkey`), its tombstone, and a create of the new key (header
`__debezium.oldkey`). All three carry the same source offset, so Kafka Connect may store it
after acknowledging only the delete; a restart from there resumes past that LSN and the create
is never sent (debezium/dbz#2549, unfixed in 3.7). The row is then missing downstream for good,
unless it is asked for again.

This module finds such deletes in a batch: the create follows its delete within two offsets,
so a delete whose next records are in the batch and hold no create lost it; one at the batch's
end is decided by reading on in the topic (see `changelake.apply.key_change_guard`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

NEW_KEY_HEADER, OLD_KEY_HEADER = "__debezium.newkey", "__debezium.oldkey"
NEW_KEY, OLD_KEY = "_new_key", "_old_key"
FOLLOWS_WITHIN = 2  # the create comes right after the delete, or after its tombstone


def header_value(raw: DataFrame, name: str) -> Column:
    """A record header's value as text (NULL where the record has none), from the Kafka
    source's `headers` column; NULL throughout when it was read without headers."""
    if "headers" not in raw.columns:
        return F.lit(None).cast("string")
    found = F.filter("headers", lambda h: h["key"] == F.lit(name))
    return F.get(found, 0)["value"].cast("string")


def header_columns(raw: DataFrame) -> list[Column]:
    """The key-change headers of each record (NULL for any other record)."""
    return [
        header_value(raw, NEW_KEY_HEADER).alias(NEW_KEY),
        header_value(raw, OLD_KEY_HEADER).alias(OLD_KEY),
    ]


@dataclass(frozen=True)
class Mark:
    """One record of a key change, as a batch's aggregation collects them."""

    partition: int
    offset: int
    tombstone: bool
    new_key: str | None  # on the delete and its tombstone
    old_key: str | None  # on the create


def marks_column() -> Column:
    """Per partition: the batch's key-change records (collected with its offsets and counts)."""
    marked = F.col(NEW_KEY).isNotNull() | F.col(OLD_KEY).isNotNull()
    return F.collect_list(
        F.when(
            marked,
            F.struct("offset", F.col("payload_text").isNull().alias("tombstone"), NEW_KEY, OLD_KEY),
        )
    )


def marks_of(partition: int, collected: Iterable[Any]) -> list[Mark]:
    return [
        Mark(partition, int(m["offset"]), bool(m["tombstone"]), m[NEW_KEY], m[OLD_KEY])
        for m in collected
    ]


@dataclass(frozen=True)
class KeyChange:
    """A delete made by a key update: its create must follow it."""

    partition: int
    offset: int
    new_key: dict[str, Any]

    def describe(self, key: Sequence[str]) -> str:
        return ", ".join(f"{k}={self.new_key.get(k)!r}" for k in key)


@dataclass(frozen=True)
class Unpaired:
    lost: list[KeyChange]  # the records after the delete are in the batch, and none is its create
    undecided: list[KeyChange]  # the batch ends before its create could come


def unpaired(marks: Sequence[Mark], ends: Mapping[str, int]) -> Unpaired:
    """Key-change deletes of a batch without their create. `ends`: per partition (as text), the
    offset after the batch's last record."""
    creates = {(m.partition, m.offset) for m in marks if m.old_key is not None and not m.tombstone}
    lost, undecided = [], []
    for m in marks:
        if m.new_key is None or m.tombstone:
            continue
        following = range(m.offset + 1, m.offset + 1 + FOLLOWS_WITHIN)
        if any((m.partition, o) in creates for o in following):
            continue
        change = KeyChange(m.partition, m.offset, _key(m.new_key))
        if ends.get(str(m.partition), 0) > following[-1]:
            lost.append(change)
        else:
            undecided.append(change)
    return Unpaired(lost, undecided)


def _key(text: str) -> dict[str, Any]:
    """The header holds the key as JsonConverter writes it, with or without its schema."""
    value = json.loads(text)
    if isinstance(value, dict) and "payload" in value and "schema" in value:
        value = value["payload"]
    return value if isinstance(value, dict) else {}
