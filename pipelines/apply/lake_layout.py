"""The lake keeps each connector's tables under its topic prefix, `<lake>/<prefix>/<schema>/<table>`
(with its changelog in `<lake>/<prefix>/_changelog/…`), so two databases' `public.orders` never
share a path. Lakes written before that kept `<lake>/<schema>/<table>`: `run` moves such a table
into place instead of snapshotting it again, when its commits say it was made from this table's
topic (anything else there is another table's, and is left alone).
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import SparkSession

from pipelines import lakefs
from pipelines.read.table import covered
from pipelines.sinks.changelog import changelog_of
from pipelines.sinks.delta import delta_exists
from pipelines.tables import TableRef


def move_legacy(spark: SparkSession, ref: TableRef, lake: str, out: Callable[[str], None]) -> None:
    old, new = ref.legacy_path(lake), ref.path(lake)
    if lakefs.exists(spark, new) or not delta_exists(spark, old):
        return
    meta = covered(spark, old)
    if meta is None or meta.topic != ref.topic:
        return
    # The changelog first: killed in between, the next run finds the base table still to move;
    # the other way round, the changelog's uncompacted changes would be left behind.
    if lakefs.exists(spark, changelog_of(old)):
        lakefs.rename(spark, changelog_of(old), changelog_of(new))
    lakefs.rename(spark, old, new)
    out(f"{ref.name}: moved {old} to {new} (each connector's tables now live under its prefix)")
