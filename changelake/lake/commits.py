"""What every changelake commit records in its Delta userMetadata (the Kafka offsets it covers,
the highest LSN and source time, the key), how to find a table's newest such commit, and which
errors are Delta write conflicts (a concurrent writer won; the write may be tried again)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from delta.exceptions import (
    ConcurrentAppendException,
    ConcurrentDeleteDeleteException,
    ConcurrentDeleteReadException,
    ConcurrentTransactionException,
    ConcurrentWriteException,
    DeltaConcurrentModificationException,
    MetadataChangedException,
    ProtocolChangedException,
)
from pyspark.sql import SparkSession

from changelake.lake import delta_log

WRITES = "writes"  # the `extra` field of `CommitMeta.writes`
LOOK_BACK = 50  # commits searched for the newest one with changelake's metadata
# Delta's write conflicts. In delta-spark's Python API they share no base class (each derives
# from PySparkException alone): catching DeltaConcurrentModificationException misses the rest.
WRITE_CONFLICTS: tuple[type[Exception], ...] = (
    DeltaConcurrentModificationException,
    ConcurrentAppendException,
    ConcurrentDeleteDeleteException,
    ConcurrentDeleteReadException,
    ConcurrentTransactionException,
    ConcurrentWriteException,
    MetadataChangedException,
    ProtocolChangedException,
)


def furthest(offsets: Mapping[str, int], more: Mapping[str, int]) -> dict[str, int]:
    """Per partition, the further of two next-offsets to read: progress never goes back."""
    return {p: max(offsets.get(p, 0), more.get(p, 0)) for p in {*offsets, *more}}


@dataclass(frozen=True)
class CommitMeta:
    """What a commit covers; stored as JSON in the commit's userMetadata."""

    kind: str  # snapshot | apply
    topic: str
    offsets: dict[str, int]  # partition → next offset to read
    max_lsn: int
    max_source_ts: str | None
    key: tuple[str, ...]
    changes: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def writes(self) -> int:
        """How many batches of the stream this commit says were written into its table (a
        snapshot: none): a count that grows by one per batch, where the highest LSN may not (a
        batch of transactions that committed late carries only lower ones)."""
        return int(self.extra.get(WRITES, 0))

    def to_json(self) -> str:
        return json.dumps({"changelake": 1, **asdict(self)}, sort_keys=True)

    @staticmethod
    def parse(text: str | None) -> CommitMeta | None:
        try:
            doc = json.loads(text or "")
        except ValueError:
            return None
        if not isinstance(doc, dict) or doc.pop("changelake", None) != 1:
            return None
        doc["key"] = tuple(doc.get("key") or ())
        return CommitMeta(**doc)


def latest_commit(spark: SparkSession, path: str) -> tuple[int, CommitMeta | None]:
    """A Delta table's newest version, and the newest commit metadata at or before it (schema
    changes and deletes record none), from its commit files (see delta_log.py)."""
    version = delta_log.newest_version(spark, path)
    if version < 0:
        raise LookupError(f"no Delta table at {path}")
    versions = range(version, max(-1, version - LOOK_BACK), -1)
    return version, newest_meta(delta_log.commit_info(spark, path, v) for v in versions)


def newest_meta(infos: Iterable[dict[str, Any] | None]) -> CommitMeta | None:
    """The first changelake metadata among commit infos, newest first (None: none has any)."""
    for info in infos:
        meta = CommitMeta.parse(info.get("userMetadata")) if info else None
        if meta is not None:
            return meta
    return None


def version_covering(
    spark: SparkSession, path: str, newest: int, covered: Callable[[CommitMeta], bool]
) -> int | None:
    """The newest version at or before `newest` whose commit's metadata `covered` accepts
    (commits without changelake's metadata, OPTIMIZE's, change no row and are passed over).
    None: none in the LOOK_BACK commits before `newest`."""
    for v in range(newest, max(-1, newest - LOOK_BACK), -1):
        info = delta_log.commit_info(spark, path, v)
        meta = CommitMeta.parse(info.get("userMetadata")) if info else None
        if meta is not None and covered(meta):
            return v
    return None
