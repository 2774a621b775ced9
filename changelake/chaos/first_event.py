"""The fault "Connect resumes from a first-event offset": the window Debezium 3.7.0 leaves open,
made to happen on purpose instead of by a lucky stop.

A graceful stop can commit an offset stored at the first of the many events a bulk statement
gives one LSN (`lsn_events_processed` = 1); the task then resumes at the next LSN and the rest of
that LSN never reaches Kafka. Waiting for a stop to land there takes luck (seen once), so this
stops the connector before a bulk transaction, finds the transaction's first insert LSN shared
by several events (peeked from the connector's own slot, nothing consumed), and stores through
Connect's offsets API exactly the offset that stop would have stored: that event, counted 1,
after the commit the slot decoded just before it. Then it resumes the connector: Debezium skips
that LSN's events, and only `run`'s seam repair (changelake/capture/seams.py) brings them back.

The connector first reads everything committed so far, and the caller keeps its own writes
away meanwhile (the chaos load pauses): a transaction committed between the stop and the bulk
would count as processed, skipped whole, and lost to the fault rather than to the window.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from changelake import pg
from changelake.capture import connectors
from changelake.capture.caught_up import wait_caught_up
from changelake.capture.connect_api import ConnectApi, quote
from changelake.capture.connect_offsets import XID_MODULUS
from changelake.capture.source import source_of
from changelake.chaos.bulk_stop import Bulk
from changelake.exceptions import ChangelakeError
from changelake.settings import Settings
from changelake.waiting import wait_until

STOP_TIMEOUT_S = 60.0
BEGIN, INSERT, COMMIT = "B", "I", "C"  # pgoutput's message types
PEEK = (
    "SELECT (lsn - '0/0')::bigint, xid::text::bigint, chr(get_byte(data, 0))"
    " FROM pg_logical_slot_peek_binary_changes("
    " %s, NULL, NULL, 'proto_version', '1', 'publication_names', %s)"
)


@dataclass(frozen=True)
class Message:
    lsn: int
    xid: int
    kind: str


@dataclass(frozen=True)
class FirstEventResume:
    connector: str
    bulk: Bulk
    lsn: int  # the shared LSN the stored offset names
    shared: int  # how many events it carries: all but the first are skipped

    def describe(self) -> str:
        return (
            f"Kafka Connect: {self.connector} resumed from an offset at the first of the "
            f"{self.shared} events of LSN {self.lsn} in a bulk transaction (xid {self.bulk.xid}, "
            f"{self.bulk.row_changes:,} row changes): Debezium skips the rest of that LSN"
        )


def seam_offset(messages: list[Message], xid: int) -> tuple[int, int, int | None]:
    """(the first insert LSN of `xid` that several inserts share, how many, the LSN of the
    commit decoded just before `xid` began, if any) from a slot's messages in decoding order."""
    mine = [m for m in messages if m.xid == xid]
    inserts = [m.lsn for m in mine if m.kind == INSERT]
    shared = next((lsn for lsn in inserts if inserts.count(lsn) >= 2), None)
    if shared is None:
        raise ChangelakeError(f"transaction {xid} has no LSN shared by several inserts")
    began = next(i for i, m in enumerate(messages) if m.xid == xid)
    commits = [m.lsn for m in messages[:began] if m.kind == COMMIT]
    return shared, inserts.count(shared), commits[-1] if commits else None


def resume_at_first_event(
    settings: Settings, connector: str, run_bulk: Callable[[], Bulk]
) -> FirstEventResume:
    """Stop `connector`, commit `run_bulk()`'s transaction, store the offset of the first event
    of its first shared LSN, resume the connector and wait until it runs."""
    api, path = ConnectApi(settings.connect_url), f"/connectors/{quote(connector)}"
    config: dict[str, Any] = api.get(f"{path}/config")
    source, slot = source_of(settings, config), config["slot.name"]
    dsn = source.dsn()
    wait_caught_up(source, slot)  # everything before the stop counts as processed: so it is
    api.put(f"{path}/stop", None)

    def stopped() -> bool:  # the task gone and its slot let go
        state = connectors.connector_state(api, connector)["connector"]
        with pg.connect(dsn, autocommit=True) as conn:
            row = conn.execute(
                "SELECT active FROM pg_replication_slots WHERE slot_name = %s", (slot,)
            ).fetchone()
        return state == "STOPPED" and row is not None and not row[0]

    if not wait_until(stopped, STOP_TIMEOUT_S):
        raise ChangelakeError(f"connector {connector} did not stop in {STOP_TIMEOUT_S:.0f}s")
    try:
        bulk = run_bulk()
        with pg.connect(dsn, autocommit=True) as conn:
            rows = conn.execute(PEEK, (slot, config["publication.name"])).fetchall()
        messages = [Message(int(lsn), int(xid) % XID_MODULUS, kind) for lsn, xid, kind in rows]
        xid = bulk.xid % XID_MODULUS
        lsn, shared, committed = seam_offset(messages, xid)
        (entry,) = api.get(f"{path}/offsets")["offsets"]
        stored = {k: v for k, v in entry["offset"].items() if not k.startswith("transaction_")}
        stored.update(lsn=lsn, lsn_proc=lsn, txId=xid, lsn_events_processed=1, messageType="INSERT")
        if committed is not None:
            stored["lsn_commit"] = committed
        api.request("PATCH", f"{path}/offsets", {"offsets": [{**entry, "offset": stored}]})
    finally:
        api.put(f"{path}/resume", None)
    connectors.wait_running(api, connector, STOP_TIMEOUT_S, lambda _: None)
    return FirstEventResume(connector, bulk, lsn, shared)
