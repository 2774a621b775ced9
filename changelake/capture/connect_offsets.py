"""The source offsets Kafka Connect stored: where Debezium resumes from after a restart, and
whether an incremental snapshot is still running. Read from the worker's offsets topic."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from changelake import kafka_io
from changelake.settings import CONNECT_OFFSETS_TOPIC

XID_MODULUS = 2**32  # Debezium stores the 32-bit xid; Postgres' xid8 carries an epoch above it


@dataclass(frozen=True)
class StoredOffset:
    connector: str
    value: dict[str, Any]
    at_ms: int | None = None  # when Connect stored it

    @property
    def xid(self) -> int | None:
        tx = self.value.get("txId")
        return None if tx is None else int(tx) % XID_MODULUS

    @property
    def lsn(self) -> int:
        return int(self.value.get("lsn_proc") or self.value.get("lsn") or 0)

    @property
    def events_at_lsn(self) -> int | None:
        """How many events of `lsn` were sent (Debezium 3.7's `lsn_events_processed`)."""
        found = self.value.get("lsn_events_processed")
        return None if found is None else int(found)

    @property
    def snapshot_correlation(self) -> str | None:
        """The signal id of the incremental snapshot running when it was stored, if any."""
        found = self.value.get("incremental_snapshot_correlation_id")
        return None if found is None else str(found)


def stored_offsets(
    bootstrap: str, since: dict[int, int], tombstones: bool = False
) -> list[StoredOffset]:
    """Every source offset Connect stored after the offsets `since` (partition → offset); with
    `tombstones`, a reset offset too (an empty value: the task starts afresh from it)."""
    found = []
    for record in kafka_io.read(bootstrap, CONNECT_OFFSETS_TOPIC, since):
        key, value = record.key, record.value
        if isinstance(key, list) and key and (isinstance(value, dict) or tombstones):
            stored = value if isinstance(value, dict) else {}
            found.append(StoredOffset(str(key[0]), stored, record.timestamp_ms))
    return found


def offsets_end(bootstrap: str) -> dict[int, int]:
    """Where the offsets topic ends now: a `since` for the offsets stored from here on."""
    return {
        p: high for p, (_, high) in kafka_io.watermarks(bootstrap, CONNECT_OFFSETS_TOPIC).items()
    }
