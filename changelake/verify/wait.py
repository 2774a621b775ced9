"""Wait until every derived table and index has applied everything the source committed so far.

"So far" is the source's WAL position when verify starts: once the replication slot has
confirmed it, every change up to it is in Kafka, below the topics' end offsets taken then. A table
has applied them when its last commit's offsets reach those ends (or only tombstones lie between);
its index, when its applied LSN reaches the table's.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from pyspark.sql import SparkSession

from changelake import kafka_io
from changelake.apply.pipeline_file import STOPPED_STATES, pipeline_state
from changelake.capture.caught_up import wait_caught_up
from changelake.exceptions import ChangelakeError
from changelake.lake.table import covered
from changelake.search.client import SearchClient
from changelake.settings import Settings
from changelake.sinks.search import SearchSink
from changelake.tables import TableRef, slot_sources

PROGRESS_EVERY_S = 5.0
Ends = dict[str, int]  # partition → end offset


def wait_applied(
    settings: Settings,
    spark: SparkSession,
    refs: list[TableRef],
    timeout_s: float,
    out: Callable[[str], None],
) -> dict[str, str]:
    """Returns the tables the running pipeline has stopped (name → its state and error), which
    will not catch up and are not waited for."""
    for slot, source in slot_sources(settings, refs).items():
        wait_caught_up(source, slot, timeout_s, say=out)
    ends = {r.name: _ends(settings.kafka_bootstrap, r.topic) for r in refs}
    client = SearchClient.of(settings, retry_for_s=0)
    deadline = time.monotonic() + timeout_s
    said = 0.0
    pending = list(refs)
    stopped: dict[str, str] = {}
    while True:
        stopped |= {n: why for n, why in _stopped(settings).items() if n in ends}
        behind = {
            r.name: why
            for r in pending
            if r.name not in stopped and (why := _behind(settings, spark, client, r, ends[r.name]))
        }
        pending = [r for r in pending if r.name in behind]
        if not pending:
            return stopped
        now = time.monotonic()
        if now > deadline:
            raise ChangelakeError(
                f"not caught up after {timeout_s:.0f}s: "
                + "; ".join(f"{n}: {why}" for n, why in behind.items()),
                "is `changelake run` running? `changelake status` shows where each table is",
            )
        if now - said >= PROGRESS_EVERY_S:
            out("waiting for " + "; ".join(f"{n}: {why}" for n, why in behind.items()))
            said = now
        time.sleep(1.0)


def _stopped(settings: Settings) -> dict[str, str]:
    """The running pipeline's tables that stopped or failed (none when no pipeline runs)."""
    _, states = pipeline_state(settings)
    return {
        name: s["state"] + (f": {s['error']}" if s.get("error") else "")
        for name, s in states.items()
        if s["state"] in STOPPED_STATES
    }


def _ends(bootstrap: str, topic: str) -> Ends:
    if topic not in kafka_io.list_topics(bootstrap, topic):
        return {}
    return {str(p): high for p, (_, high) in kafka_io.watermarks(bootstrap, topic).items()}


def _behind(
    settings: Settings, spark: SparkSession, client: SearchClient, ref: TableRef, ends: Ends
) -> str | None:
    """Why the table (or its index) has not applied up to `ends` yet, or None."""
    meta = covered(spark, ref.path(settings.lake))
    if meta is None:
        return "no Delta table yet" if ends else None
    for partition, end in ends.items():
        applied = int(meta.offsets.get(partition, 0))
        start = {int(p): (applied if p == partition else e) for p, e in ends.items()}
        if applied < end and _changes_below(settings, ref.topic, start, end):
            return f"Delta at offset {applied:,} of {end:,}"
    if ref.search is not None:
        sink = SearchSink(client, ref.search, ref.topic, lambda _text: None)
        lsn = sink.applied_lsn()
        if lsn is None or lsn < meta.max_lsn:
            return f"index at LSN {lsn or 0} of {meta.max_lsn}"
    return None


def _changes_below(settings: Settings, topic: str, start: dict[int, int], end: int) -> bool:
    """Whether any record from `start` up to offset `end` carries a change (a batch of only
    tombstones commits nothing, so the table's offsets can rest just below the end)."""
    for record in kafka_io.read(settings.kafka_bootstrap, topic, start):
        if record.offset < end and record.value is not None:
            return True
    return False
