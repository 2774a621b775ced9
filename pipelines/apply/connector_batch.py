"""One micro-batch of a connector's stream, split by table: its records are cut into envelopes
and counted once, then each table with records applies its own (`TableApplier`).

A table's own problem (a schema change it cannot take, see `ChangelakeError`) stops that table,
and a service it alone needs failing (OpenSearch, after the search client's retries) has it
retried later: either way it is skipped from then on, its offsets staying where its last commit
put them, while the others go on. Any other failure fails the batch, and so the stream; tables
that committed meanwhile restart after what they committed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pipelines.apply.batch import TableApplier, record_stats
from pipelines.changelog.decode import envelopes
from pipelines.exceptions import ChangelakeError, RetryableError


@dataclass
class Member:
    """A table in a connector's stream."""

    applier: TableApplier
    error: str | None = None  # its own problem: it applies nothing more in this stream
    retry: str | None = None  # a service failed it: the run retries it alone, later


class ConnectorBatch:
    """The `foreachBatch` function of a connector's stream."""

    def __init__(self, members: dict[str, Member]):
        self.members = members  # by topic; the run marks a member with an error stopped

    def __call__(self, raw: DataFrame, batch_id: int) -> None:
        started = time.monotonic()
        env = envelopes(raw).persist()
        try:
            per_topic = record_stats(env)
            counted = time.monotonic() - started
            for topic, stats in sorted(per_topic.items()):
                member = self.members.get(topic)
                if member is None or member.error is not None or member.retry is not None:
                    continue
                stats.started, stats.phases["records"] = started, counted
                try:
                    member.applier.apply_records(
                        env.where(F.col("topic") == topic), batch_id, stats
                    )
                except RetryableError as exc:  # a service that may come back: retried alone
                    member.retry = str(exc)
                except ChangelakeError as exc:  # the table's own: it alone stops
                    member.error = str(exc)
        finally:
            env.unpersist()
