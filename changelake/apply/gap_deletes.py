"""Rows deleted at the source while capture was lost, found once a re-sync's snapshot is
applied: a live lake row the snapshot did not send again (its LSN is below the new slot's start)
whose key the source no longer has. Each becomes a delete change at that LSN, applied through
the table's sinks like any batch (`TableApplier.sweep`): its base table, history and index.

Only keys the source lacks are deleted, and only after every transaction begun before the slot
was made has ended (`resync.old_transactions_over`): a row such a transaction wrote carries an
LSN below the slot's start, and the source shows it once it commits. A key inserted again later
comes with a higher LSN than the delete, which the LSN guard lets win.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psycopg import sql
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from changelake import pg
from changelake.changelog.decode import (
    LSN,
    NOTE,
    OFFSET,
    OP,
    PARTITION,
    REASON,
    SOURCE_TS,
    TOASTED,
    TX,
)
from changelake.lake.layout import DELETED
from changelake.lake.table import read_table
from changelake.tables import TableRef

Key = tuple[Any, ...]
CHUNK = 1000  # keys asked about in one query


def untouched_keys(
    spark: SparkSession, ref: TableRef, lake: str, below: int
) -> tuple[tuple[str, ...], list[Key]]:
    """The table's key columns, and the keys of its live rows whose last change has an LSN
    below `below`."""
    read = read_table(spark, ref.path(lake), ref.soft_delete)
    if read.meta is None or not read.meta.key:
        return (), []
    rows = read.rows.where(~F.col(DELETED)) if ref.soft_delete else read.rows
    found = rows.where(F.col(LSN) < F.lit(below)).select(*read.meta.key).collect()
    return tuple(read.meta.key), [tuple(r) for r in found]


def absent_at_source(dsn: str, ref: TableRef, key: Sequence[str], keys: list[Key]) -> list[Key]:
    """Those of `keys` (values of columns `key`) the source table has no row for."""
    if not keys:
        return []
    table = sql.Identifier(ref.schema, ref.table)
    with pg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET TimeZone = 'UTC'")  # Spark hands timestamps over as UTC wall times
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
        absent: list[Key] = []
        for start in range(0, len(keys), CHUNK):
            chunk = keys[start : start + CHUNK]
            query = sql.SQL(
                "SELECT v.i FROM (VALUES {}) AS v(i, {})"
                " WHERE NOT EXISTS (SELECT 1 FROM {} t WHERE {})"
            ).format(sql.SQL(", ").join([row] * len(chunk)), names, table, match)
            params = [v for i, k in enumerate(chunk) for v in (i, *k)]
            absent += [chunk[int(r[0])] for r in conn.execute(query, params).fetchall()]
    return absent


def delete_changes(
    spark: SparkSession, columns: T.StructType, key: Sequence[str], keys: list[Key], lsn: int
) -> DataFrame:
    """Decoded change rows (as `decode` makes them, none of them a dead letter) deleting
    `keys` at `lsn`, now."""
    keyed = spark.createDataFrame(keys, T.StructType([columns[c] for c in key]))
    return keyed.select(
        *(
            F.col(f.name) if f.name in key else F.lit(None).cast(f.dataType).alias(f.name)
            for f in columns.fields
        ),
        F.lit("d").alias(OP),
        F.lit(lsn).cast("long").alias(LSN),
        F.current_timestamp().alias(SOURCE_TS),
        F.array().cast("array<string>").alias(TOASTED),
        F.lit(-1).alias(PARTITION),  # from no partition of the topic
        F.lit(0).cast("long").alias(OFFSET),
        F.lit(None).cast("long").alias(TX),
        F.lit(None).cast("string").alias(REASON),
        F.lit(None).cast("string").alias(NOTE),
        F.lit(None).cast("string").alias("_value"),
        F.lit(None).cast("string").alias("_topic"),
    )
