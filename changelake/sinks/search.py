"""One table's OpenSearch index: built whole behind an alias, then changed by one bulk per batch.

Documents are written through the alias `<topic>` (lower-cased); the index behind it is a
generation `<alias>-<UTC time>-<random>`. A build (the snapshot, a rebuild, `reindex`) fills a
fresh generation with refresh off and only then moves the alias to it in one atomic call, so a
search never sees an empty or half-built index. Each document's version is its row's LSN
(external versioning): a replayed or out-of-order change can never regress a document, and a
delete is versioned too. `changelake-state` holds each alias's applied LSN for `status`.
"""

from __future__ import annotations

import re
import secrets
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from changelake.changelog.decode import LSN, OFFSET, PARTITION
from changelake.exceptions import ChangelakeError, RetryableError
from changelake.lake.errors import ERRORS_SCHEMA
from changelake.search.bulk import BulkResult, BulkWriter, Doc, Rejected
from changelake.search.client import SearchApiError, SearchClient
from changelake.search.config import IndexSpec, alias_for
from changelake.search.documents import DELETE, ID, SOURCE, VERSION, documents

STATE_INDEX = "changelake-state"
# How long OpenSearch remembers a deleted document's version. A replay of the deleted row's older
# insert within this window is refused; after it, the LSN guard no longer covers that key.
GC_DELETES = "1h"
Say = Callable[[str], None]


@dataclass(frozen=True)
class BuildResult:
    index: str
    docs: int
    seconds: float
    rejected: list[Rejected]


class SearchSink:
    def __init__(self, client: SearchClient, spec: IndexSpec, topic: str, say: Say) -> None:
        self.client, self.spec, self.say = client, spec, say
        self.alias = alias_for(topic)
        self.writer = BulkWriter(client, f"{spec.table} index", say)
        self._state_ready = False

    # --- what exists ---------------------------------------------------------------------------
    def indexes(self) -> list[str]:
        return self.client.alias_indexes(self.alias)

    def stale_because(self, schema: T.StructType, key: tuple[str, ...]) -> str | None:
        """Why the index must be rebuilt before batches apply to it (None if it need not):
        it is missing, or was built for other fields or column types."""
        current = self.indexes()
        if not current:
            return "it does not exist yet"
        mapping = self.client.request("GET", f"/{current[0]}/_mapping")
        meta = mapping[current[0]]["mappings"].get("_meta", {}).get("changelake", {})
        if meta.get("properties") != self.spec.mapping(schema, key)["properties"]:
            return f"its fields or their types differ from {self.spec.source}"
        return None

    def applied_lsn(self) -> int | None:
        applied = (self.state() or {}).get("applied_lsn")
        return None if applied is None else int(applied)

    def applied_writes(self) -> int | None:
        """The table's write (`CommitMeta.writes`) the index last caught up with (None: not
        recorded, by an older changelake)."""
        applied = (self.state() or {}).get("applied_writes")
        return None if applied is None else int(applied)

    def state(self) -> dict[str, Any] | None:
        found = self.client.request("GET", f"/{STATE_INDEX}/_doc/{self.alias}", missing_ok=True)
        return found.get("_source") if found and found.get("found") else None

    # --- writing -------------------------------------------------------------------------------
    def build(self, rows: DataFrame, schema: T.StructType, key: tuple[str, ...]) -> BuildResult:
        """A fresh generation from `rows` (the table's live rows), then the alias moved to it."""
        self.spec.check(schema)
        started = time.monotonic()
        index = self._create(schema, key)
        try:
            result = self.writer.write(_docs(documents(rows, self.spec, key)), index, False)
            self.client.request("PUT", f"/{index}/_settings", {"index": {"refresh_interval": None}})
            self.client.request("POST", f"/{index}/_refresh")
            self._ensure_ours(index)
        except BaseException:
            self.client.request("DELETE", f"/{index}", missing_ok=True)
            raise
        self._swap(index)
        self._drop_older(index)
        return BuildResult(index, result.written, time.monotonic() - started, result.rejected)

    def apply(self, rows: DataFrame, key: tuple[str, ...], truncate_lsn: int | None) -> BulkResult:
        """One batch: the truncate, then each key's newest change (complete: no placeholders)."""
        if truncate_lsn is not None:
            self._truncate(truncate_lsn)
        docs = documents(rows, self.spec, key)
        return self.writer.write(_docs(docs), self.alias, True)

    def record(self, lsn: int, source_ts: str | None, writes: int) -> None:
        """Remember how far the index has applied: the table's highest LSN and its write
        number. Never back to a lower LSN (the document's version); a batch that leaves the
        highest LSN as it was (late transactions only) still moves the write number on."""
        self._ensure_state_index()
        doc = {
            "alias": self.alias,
            "table": self.spec.table,
            "applied_lsn": lsn,
            "applied_writes": writes,
            "source_ts": source_ts,
            "updated_at": datetime.now(UTC).isoformat(),
        }
        path = f"/{STATE_INDEX}/_doc/{self.alias}?version={lsn}&version_type=external_gte"
        try:
            self.client.request("PUT", path, doc)
        except SearchApiError as exc:
            if exc.status != 409:  # 409: a higher LSN is recorded already
                raise

    # --- pieces --------------------------------------------------------------------------------
    def _create(self, schema: T.StructType, key: tuple[str, ...]) -> str:
        index = f"{self.alias}-{datetime.now(UTC):%Y%m%d%H%M%S}-{secrets.token_hex(3)}"
        body = {
            "settings": {
                "index": {
                    "number_of_shards": 1,
                    "number_of_replicas": 0,  # one node here; raise it on a real cluster
                    "refresh_interval": "-1",  # a build refreshes once, at the end
                    "gc_deletes": GC_DELETES,
                }
            },
            "mappings": self.spec.mapping(schema, key),
        }
        self.client.request("PUT", f"/{index}", body)
        return index

    def _ensure_ours(self, index: str) -> None:
        """A newer build deletes older generations; if that was this one mid-build, its next bulk
        re-created it with guessed mappings. Never put the alias on such an index."""
        mapping = self.client.request("GET", f"/{index}/_mapping", missing_ok=True) or {}
        meta = mapping.get(index, {}).get("mappings", {}).get("_meta", {})
        if "changelake" not in meta:
            raise RetryableError(
                f"{self.spec.table}: another build of {self.alias} replaced this one meanwhile"
            )

    def _swap(self, index: str) -> None:
        """Move the alias to `index` in one atomic call: searches see the old or the new."""
        old = self.indexes()
        actions: list[dict[str, Any]] = [{"remove": {"index": i, "alias": self.alias}} for i in old]
        actions.append({"add": {"index": index, "alias": self.alias}})
        self.client.request("POST", "/_aliases", {"actions": actions})

    def _drop_older(self, index: str) -> None:
        """Delete the generations older than `index` (names sort by their UTC time), including
        ones a crashed build left behind. Best effort: a leftover costs disk, not correctness."""
        try:
            for older in sorted(g for g in self._generations() if g < index):
                self.client.request("DELETE", f"/{older}", missing_ok=True)
        except ChangelakeError as exc:
            self.say(f"{self.spec.table}: old index generations not deleted yet ({exc.message})")

    def _generations(self) -> list[str]:
        """Every generation of this alias, including ones a crashed build left behind."""
        found = self.client.request("GET", f"/_cat/indices/{self.alias}-*?format=json&h=index")
        pattern = re.compile(re.escape(self.alias) + r"-\d{14}-[0-9a-f]{6}")
        return [i["index"] for i in found or [] if pattern.fullmatch(i["index"])]

    def _truncate(self, truncate_lsn: int) -> None:
        """Delete every document older than the truncate, each with the truncate's LSN as its
        version, so a late replay of a wiped row is refused too."""
        query = {"range": {LSN: {"lt": truncate_lsn}}}
        while True:
            self.client.request("POST", f"/{self.alias}/_refresh")  # searches see refreshed docs
            found = self.client.request(
                "POST", f"/{self.alias}/_search", {"size": 5000, "_source": False, "query": query}
            )
            ids = [hit["_id"] for hit in found["hits"]["hits"]]
            if not ids:
                return
            done = self.writer.write(
                (Doc(i, truncate_lsn, True, None) for i in ids), self.alias, True
            )
            if done.written == 0:  # nothing deletable left: do not search for it forever
                self.say(
                    f"{self.spec.table}: {len(ids)} documents outlived the truncate: {ids[:3]}"
                )
                return

    def _ensure_state_index(self) -> None:
        if self._state_ready:
            return
        body = {
            "settings": {"index": {"number_of_shards": 1, "number_of_replicas": 0}},
            "mappings": {"dynamic": False, "properties": {"applied_lsn": {"type": "long"}}},
        }
        try:
            self.client.request("PUT", f"/{STATE_INDEX}", body)
        except SearchApiError as exc:
            if exc.error_type != "resource_already_exists_exception":
                raise
        self._state_ready = True


def _docs(frame: DataFrame) -> Iterator[Doc]:
    for row in frame.toLocalIterator(prefetchPartitions=True):
        yield Doc(
            row[ID], int(row[VERSION]), bool(row[DELETE]), row[SOURCE], row[PARTITION], row[OFFSET]
        )


def rejected_frame(
    spark: SparkSession, topic: str, index: str, rejected: list[Rejected]
) -> DataFrame:
    """Rejected documents as `_errors` rows: the document as sent, and OpenSearch's reason."""
    now = datetime.now(UTC)
    rows = [
        (
            topic,
            r.doc.partition,
            r.doc.offset,
            r.doc.source,
            f"OpenSearch rejected document {r.doc.id} for index {index}: {r.reason}",
            now,
        )
        for r in rejected
    ]
    return spark.createDataFrame(rows, ERRORS_SCHEMA)
