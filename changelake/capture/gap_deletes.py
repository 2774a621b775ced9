"""Rows deleted at the source while capture was lost, deleted through the log, as Debezium would
have: once a re-sync's snapshot has sent again every row that exists (each record at or past the
new slot's start), a key whose newest record in its topic is still a row from before the slot is
one the snapshot did not find. Each such key the source lacks gets a delete event (its last row
as `before`, at the slot's LSN) and a tombstone, produced into its topic under the key bytes
Debezium wrote: the pipeline applies the delete like any change (the LSN guard: later than the
row, earlier than anything after the slot), to the base table, its history and its index, and a
snapshot taken from the topic later, or the topic's compaction, forgets the key too.

Only keys the source lacks are deleted, and only once every transaction begun before the slot
was made has ended (`resync.old_transactions_over`): a row such a transaction wrote carries an
LSN below the slot's start, and the source shows it once it commits.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from psycopg import sql

from changelake import kafka_io, pg
from changelake.changelog.key_changes import NEW_KEY_HEADER, OLD_KEY_HEADER
from changelake.tables import TableRef

Key = tuple[Any, ...]
CHUNK = 1000  # keys asked about in one query
READ_TIMEOUT_S = 3600.0  # a whole topic, read once
# A number as the record holds it, between two private-use characters while its JSON is changed:
# re-printed by Python, a decimal would lose its trailing zeros.
_NUMBER = "\ue000{}\ue001"
_NUMBER_BACK = re.compile('"\ue000([^\ue001"]*)\ue001"')


@dataclass(frozen=True)
class Newest:
    """A key's newest record in its topic, as far as a gap delete needs it."""

    partition: int
    offset: int
    lsn: int | None  # None: a tombstone, a delete, a truncate, or no position at all


def stale_keys(bootstrap: str, topic: str, below: int) -> dict[bytes, Newest]:
    """Per key (its bytes) whose newest record is a row at an LSN below `below`, that record."""
    newest: dict[bytes, Newest] = {}
    for record in kafka_io.read(bootstrap, topic, timeout_s=READ_TIMEOUT_S, raw=True):
        if record.key is not None:
            at = row_lsn(record.value)
            newest[record.key] = Newest(record.partition, record.offset, at)
    return {k: n for k, n in newest.items() if n.lsn is not None and n.lsn < below}


def row_lsn(value: bytes | None) -> int | None:
    """The position of a record that writes a row (create, update, read): its source's `lsn`,
    or an incremental snapshot's read's streaming position (`sequence`); None for anything else.
    Only the envelope's tail is parsed: its `source` comes after the row images."""
    if value is None:
        return None
    text = value.decode("utf-8", "replace")
    at, op = text.rfind('"source":'), text.rfind('"op":"')
    if at < 0 or op < 0 or text[op + 6 : op + 7] not in ("c", "u", "r"):
        return None
    try:
        source, _ = json.JSONDecoder().raw_decode(text, at + len('"source":'))
    except ValueError:
        return None
    if not isinstance(source, dict):
        return None
    if source.get("lsn") is not None:
        return int(source["lsn"])
    try:
        return int(json.loads(source.get("sequence") or "[]")[1])
    except (ValueError, IndexError, TypeError):
        return None


def key_values(key: bytes) -> tuple[list[str], Key]:
    """The key columns and values a record's key holds (JsonConverter's, schema and payload)."""
    doc = json.loads(key, parse_float=Decimal)
    payload = doc.get("payload", doc) if isinstance(doc, dict) else {}
    return list(payload), tuple(payload.values())


def absent_at_source(dsn: str, ref: TableRef, key: Sequence[str], keys: list[Key]) -> list[Key]:
    """Those of `keys` (values of columns `key`) the source table has no row for."""
    if not keys:
        return []
    table = sql.Identifier(ref.schema, ref.table)
    absent: list[Key] = []
    with pg.connect(dsn, autocommit=True) as conn:
        types = {
            str(name): str(kind)
            for name, kind in conn.execute(
                "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute"
                " WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped",
                (table.as_string(conn),),
            ).fetchall()
        }
        # Each value cast to its column's type: psycopg sends a str as text, which = does not
        # compare with a uuid or an enum.
        values: list[sql.Composable] = [sql.SQL("%s::int")]
        values += [sql.SQL("%s::{}").format(sql.SQL(types[c])) for c in key]
        row = sql.SQL("({})").format(sql.SQL(", ").join(values))
        names = sql.SQL(", ").join(sql.Identifier(c) for c in key)
        match = sql.SQL(" AND ").join(
            sql.SQL("t.{c} = v.{c}").format(c=sql.Identifier(c)) for c in key
        )
        for start in range(0, len(keys), CHUNK):
            chunk = keys[start : start + CHUNK]
            query = sql.SQL(
                "SELECT v.i FROM (VALUES {}) AS v(i, {})"
                " WHERE NOT EXISTS (SELECT 1 FROM {} t WHERE {})"
            ).format(sql.SQL(", ").join([row] * len(chunk)), names, table, match)
            params = [v for i, k in enumerate(chunk) for v in (i, *k)]
            absent += [chunk[int(r[0])] for r in conn.execute(query, params).fetchall()]
    return absent


def delete_event(value: bytes, lsn: int, now_ms: int) -> bytes:
    """The delete Debezium would have sent of the row `value` (a create, update or read, lean
    or with its schema inline): its row as `before`, at `lsn`, in no transaction."""
    doc = json.loads(value, parse_float=_NUMBER.format, parse_int=_NUMBER.format)
    envelope = doc["payload"] if isinstance(doc.get("payload"), dict) else doc
    envelope["before"] = envelope.get("after") or envelope.get("before")
    envelope["after"], envelope["op"] = None, "d"
    _stamp(envelope, now_ms)
    if "transaction" in envelope:
        envelope["transaction"] = None
    source = envelope["source"]
    source.update(lsn=lsn, sequence=json.dumps([None, str(lsn)]))
    _stamp(source, now_ms)
    for name, value_now in (("snapshot", "false"), ("txId", None), ("xmin", None)):
        if name in source:
            source[name] = value_now
    text = json.dumps(doc, ensure_ascii=False, separators=(",", ":"))
    return _NUMBER_BACK.sub(r"\1", text).encode()


def _stamp(part: dict[str, Any], now_ms: int) -> None:
    for name, scale in (("ts_ms", 1), ("ts_us", 1_000), ("ts_ns", 1_000_000)):
        if name in part:
            part[name] = now_ms * scale


def delete_keys(
    bootstrap: str, topic: str, stale: dict[bytes, Newest], keys: list[bytes], lsn: int
) -> None:
    """For each of `keys`, a delete event of its newest record and a tombstone, into its
    partition of `topic`."""
    records = []
    now_ms = int(time.time() * 1000)
    for key in keys:
        found = stale[key]
        last = kafka_io.fetch_one(bootstrap, topic, found.partition, found.offset)
        if last.value is None:
            continue
        headers = {
            k: v for k, v in last.headers.items() if k not in (NEW_KEY_HEADER, OLD_KEY_HEADER)
        }
        event = delete_event(last.value, lsn, now_ms)
        records += [(found.partition, key, event, headers), (found.partition, key, None, {})]
    kafka_io.produce(bootstrap, topic, records)
