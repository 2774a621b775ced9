"""A whole batch of one table's records → change rows in one schema, plus dead letters.

The batch's schema versions are decoded one by one and brought to a single set of columns: the
widest type of each column across the versions, and every column any version has.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import reduce

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from changelake.changelog.decode import (
    TX,
    Fetch,
    Schemas,
    Version,
    decode,
    malformed,
    split,
    unresolved,
    versions,
)
from changelake.changelog.evolution import widens
from changelake.changelog.exceptions import SchemaError


@dataclass
class Decoded:
    rows: DataFrame | None  # decoded rows, good and bad (see decode.split); None: no version
    malformed: DataFrame  # records that are not even an envelope, or whose schema is unknown
    columns: T.StructType  # the table's columns as this batch's events describe them
    key: tuple[str, ...]
    toastable: tuple[str, ...]
    unresolved: int = 0  # records whose schema fingerprint is unknown (dead letters)
    missing: tuple[str, ...] = ()  # why, one reason per such version

    def persist(self) -> None:
        """Decode once: the stats, the MERGE and the dead letters all read the cached rows."""
        if self.rows is not None:
            self.rows = self.rows.persist()

    def unpersist(self) -> None:
        if self.rows is not None:
            self.rows.unpersist()

    @property
    def changes(self) -> DataFrame | None:
        """The good rows, as every sink but a history takes them (no transaction id)."""
        found = self.with_transactions
        return None if found is None else found.drop(TX)

    @property
    def with_transactions(self) -> DataFrame | None:
        """The good rows, each with its source transaction's id (a history keeps it)."""
        return None if self.rows is None else split(self.rows)[0]

    @property
    def errors(self) -> DataFrame:
        if self.rows is None:
            return self.malformed
        return self.malformed.unionByName(split(self.rows)[1])


def _widest(table: str, rows: Sequence[Version]) -> T.StructType:
    fields: dict[str, T.DataType] = {}
    for version in rows:
        for f in version.row.spark_struct().fields:
            old = fields.get(f.name)
            if old is None or widens(old, f.dataType):
                fields[f.name] = f.dataType
            elif not widens(f.dataType, old):
                raise SchemaError(
                    f"table {table}, column {f.name}: events in one batch disagree on its type "
                    f"({old.simpleString()} and {f.dataType.simpleString()})"
                )
    return T.StructType([T.StructField(n, t) for n, t in fields.items()])


def _key(table: str, rows: Sequence[Version]) -> tuple[str, ...]:
    keys = {v.row.key for v in rows if v.row.key}  # key-less: dead letters, or events
    if len(keys) > 1:
        raise SchemaError(f"table {table}: events in one batch disagree on the primary key {keys}")
    return keys.pop() if keys else ()


def decode_batch(
    env: DataFrame,
    table: str,
    placeholder: str,
    fetch: Fetch,
    schemas: Schemas,
    known: dict[int, Version] | None = None,
    firsts: Mapping[int, tuple[int, int]] | None = None,
    events: bool = False,
) -> Decoded:
    """`known`: the schema versions a stream has already parsed, by version id (kept by the
    caller across batches); `fetch`, `schemas`, `firsts`: see `versions`; `events`: the table is
    an event table (see `decode`)."""
    try:
        return _decode_batch(env, table, placeholder, fetch, schemas, known, firsts, events)
    except SchemaError as exc:
        if exc.message.startswith("table "):
            raise
        raise SchemaError(f"table {table}, {exc.message}", exc.hint) from exc


def _decode_batch(
    env: DataFrame,
    table: str,
    placeholder: str,
    fetch: Fetch,
    schemas: Schemas,
    known: dict[int, Version] | None,
    firsts: Mapping[int, tuple[int, int]] | None,
    events: bool,
) -> Decoded:
    found, missing = versions(env, fetch, schemas, known, firsts)
    rows = [v for v in found if not v.row.truncate]
    columns = _widest(table, rows or found)
    key = _key(table, rows)
    toastable = tuple(sorted({c for v in found for c, t in v.row.types.items() if t.toastable}))
    parts = []
    for version in found:
        changes = decode(env, version, placeholder, events)
        parts.append(
            changes.select(
                *[
                    F.col(c).cast(columns[c].dataType).alias(c) if c in columns.names else F.col(c)
                    for c in changes.columns
                ]
            )
        )
    union = (
        reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), parts) if parts else None
    )
    bad = malformed(env)
    if not missing:
        return Decoded(union, bad, columns, key, toastable)
    lost = unresolved(env, missing)  # rare: counted here, not in the batch's aggregations
    reasons = tuple(m.reason for m in missing)
    return Decoded(union, bad.unionByName(lost), columns, key, toastable, lost.count(), reasons)
