"""A changelake table as of its newest change, read without Spark: Polars and deltalake only.

    python examples/read_current.py DIR SCHEMA TABLE    # prints the rows
    (DIR: the lake's folder of the table's connector, `<lake>/<topic prefix>`)
    from read_current import current                     # or copy the function

What `changelake query` does (merge-on-read, see docs/readers.md):
the base table (`DIR/SCHEMA/TABLE`) holds every change up to its compacted epoch, recorded in
its newest changelake commit's metadata; the changelog (`DIR/_changelog/SCHEMA/TABLE`) holds
the changes since, appended per batch. Per key the newest change wins, by (`_cdc_lsn`, Kafka
partition, offset); it shows unless the base table holds that key at an equal or newer LSN; a
delete removes the row (a soft-deleting table keeps it, marked); a truncate, recorded in the
commit metadata, removes every row and change with a lower LSN.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import polars as pl
from deltalake import DeltaTable

LSN, OP, TS, EPOCH = "_cdc_lsn", "_cdc_op", "_cdc_source_ts", "_cdc_epoch"
DELETED, DELETED_AT = "_cdc_deleted", "_cdc_deleted_at"
WHERE_FROM = ("_kafka_partition", "_kafka_offset", EPOCH, "_cdc_toasted", "_base_lsn")


def commit_meta(path: str) -> dict[str, Any]:
    """The newest changelake commit metadata of a Delta table ({} when none)."""
    for entry in DeltaTable(path).history(50):  # newest first
        try:
            doc = json.loads(entry.get("userMetadata") or "")
        except ValueError:
            continue
        if isinstance(doc, dict) and doc.get("changelake") == 1:
            return doc
    return {}


def current(lake: str, schema: str, table: str) -> pl.DataFrame:
    base_path = f"{lake.rstrip('/')}/{schema}/{table}"
    log_path = f"{lake.rstrip('/')}/_changelog/{schema}/{table}"
    # The changelog's version first: a compaction merges into the base table before it drops
    # the epochs from the changelog, so this order never misses a change.
    log = pl.read_delta(log_path) if DeltaTable.is_deltatable(log_path) else None
    log_meta = commit_meta(log_path) if log is not None else {}
    base, base_meta = pl.read_delta(base_path), commit_meta(base_path)
    compacted = base_meta.get("extra", {}).get("epoch", 0)
    if log is None or log_meta.get("extra", {}).get("epoch", 0) <= compacted:
        return base  # the changelog holds nothing the base table lacks
    key: list[str] = log_meta.get("key") or base_meta.get("key") or []
    truncates = [
        m["extra"]["truncate"] for m in (base_meta, log_meta) if "truncate" in m.get("extra", {})
    ]
    truncate = max(truncates, key=lambda t: t["lsn"], default=None)

    changes = (
        log.filter((pl.col(EPOCH) > compacted) & (pl.col(OP) != "t"))
        .sort(LSN, "_kafka_partition", "_kafka_offset")
        .unique(key, keep="last")
    )
    newer = changes.join(
        base.select(*key, pl.col(LSN).alias("_base_lsn")), on=key, how="left", nulls_equal=True
    ).filter(pl.col("_base_lsn").is_null() | (pl.col(LSN) > pl.col("_base_lsn")))
    kept = base.join(newer.select(key), on=key, how="anti", nulls_equal=True)
    soft = DELETED in base.columns
    if soft:
        deleted = pl.col(OP) == "d"
        newer = newer.with_columns(
            deleted.alias(DELETED), pl.when(deleted).then(pl.col(TS)).alias(DELETED_AT)
        )
    else:
        newer = newer.filter(pl.col(OP) != "d")
    rows = pl.concat(
        [kept, newer.drop([c for c in WHERE_FROM if c in newer.columns])], how="diagonal_relaxed"
    )
    if truncate is None:
        return rows
    wiped = pl.col(LSN) < truncate["lsn"]
    if not soft:
        return rows.filter(~wiped)
    at = pl.lit(truncate.get("source_ts")).str.to_datetime(time_zone="UTC")
    return rows.with_columns(
        (pl.col(DELETED) | wiped).alias(DELETED),
        pl.when(wiped & ~pl.col(DELETED)).then(at).otherwise(pl.col(DELETED_AT)).alias(DELETED_AT),
    )


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: read_current.py DIR SCHEMA TABLE  (DIR: <lake>/<topic prefix>)")
    with pl.Config(tbl_rows=50):
        print(current(*sys.argv[1:]))
