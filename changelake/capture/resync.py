"""Capture started again after its replication slot lost changes (dropped, invalidated, left
behind by a failover, or made anew past the connector's offset): the connector stopped, its slot
made anew at the server's present position, Connect's stored offset moved there, the connector
resumed, and every keyed table it captures asked for again through an incremental snapshot
(`resend`), while streaming goes on.

The offset is moved rather than deleted: with no offset, `snapshot.mode=initial` would read every
table before streaming again, blocking the stream for as long, and re-read event tables too (a
snapshot of an append-only table appends its rows a second time). Moved to the new slot's
consistent point, Debezium streams from the slot at once (an offset behind a slot's start is the
"no longer available on the server" failure this repairs).

What the gap lost is then in two parts: rows changed or added, which the snapshot sends again;
and rows deleted, which it cannot (it reads only rows that exist). The pipeline reconciles those
(`apply/resync.py`): once the snapshot is applied, a live lake row the snapshot did not touch
(its LSN below the new slot's start) whose key the source no longer has is deleted.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from psycopg import sql

from changelake import pg
from changelake.capture.connect_api import ConnectApi, quote
from changelake.capture.connectors import connector_state
from changelake.capture.removal import drop_replication_slot, stop_connector
from changelake.capture.source import Source
from changelake.capture.source_checks import DEFAULT_SLOT
from changelake.exceptions import ChangelakeError
from changelake.tables import TableRef
from changelake.waiting import wait_until

# The slot troubles a re-sync mends. A source replaced or restored behind the lake is not one:
# its changes would be mixed with another database's (see slot_trouble.rebuild).
RESYNC_CAUSES = ("slot_missing", "slot_invalidated", "slot_recreated", "failover")
OFFSET_LSNS = ("lsn", "lsn_proc", "lsn_commit")
# Offset entries that belong to where the old slot was: an incremental snapshot running then
# (its chunks would resume from a window the new slot never saw), events counted at an LSN.
STALE_OFFSET_KEYS = ("lsn_events_processed",)
STALE_OFFSET_PREFIX = "incremental_snapshot"


@dataclass(frozen=True)
class Restarted:
    """Capture made to start again: from where, and how to tell old transactions are over."""

    lsn: int  # the new slot's consistent point: every change after it is streamed
    xmax: int  # the first transaction id not yet begun at that point (pg_current_snapshot)


@dataclass(frozen=True)
class Whole:
    """A whole table, for `resend.send`: Debezium reads every row of it."""

    ref: TableRef

    def condition(self, runs: int) -> sql.Composable:
        return sql.SQL("(TRUE)")


def restart_capture(
    api: ConnectApi,
    connector: str,
    source: Source,
    config: dict[str, str],
    timeout_s: float = 60.0,
) -> Restarted:
    """Stop `connector` (its Connect `config`), make its slot anew on `source` (as a failover
    slot when the config asks and the server has them), move its stored offset there and
    resume it."""
    slot = config.get("slot.name") or DEFAULT_SLOT
    failover = config.get("slot.failover", "false").lower() == "true"
    prefix = config.get("topic.prefix", "")
    name = quote(connector)
    stop_connector(api, connector, timeout_s, "its slot and offsets are as they were")
    drop_replication_slot(source, slot, timeout_s)
    with pg.connect(source.dsn(), autocommit=True) as conn:
        version = conn.info.server_version
        args = sql.SQL(", false, false, true") if failover and version >= 170000 else sql.SQL("")
        made = conn.execute(
            sql.SQL(
                "SELECT (lsn - '0/0')::bigint"
                " FROM pg_create_logical_replication_slot({}, 'pgoutput'{})"
            ).format(sql.Literal(slot), args)
        ).fetchone()
        # After the slot, in a statement of its own: a statement's snapshot is taken as it
        # starts, and transactions begun while the slot was being made count too.
        begun = conn.execute("SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint")
        xmax = begun.fetchone()
    assert made is not None and xmax is not None  # functions returning one row
    restarted = Restarted(int(made[0]), int(xmax[0]))
    offsets = api.get(f"/connectors/{name}/offsets").get("offsets") or []
    body = moved(offsets, restarted.lsn, prefix)
    api.request("PATCH", f"/connectors/{name}/offsets", body)
    api.put(f"/connectors/{name}/resume", None)
    if not wait_until(lambda: _running(api, connector), timeout_s, interval_s=0.5):
        raise ChangelakeError(
            f"re-sync: connector {connector} did not run again within {timeout_s:.0f}s after"
            f" its slot {slot} was made anew",
            "see `changelake connectors status` and logs/connect.log",
        )
    return restarted


def moved(offsets: list[dict[str, Any]], lsn: int, prefix: str) -> dict[str, Any]:
    """The body of PATCH /connectors/NAME/offsets that puts each of the connector's stored
    offsets at `lsn`, keeping what else it holds (the transaction and the time it names only
    describe the last event; Debezium reads its position from the LSNs). With none stored, one
    for its source partition (`prefix`: its topic.prefix), which Debezium names by it."""
    entries = []
    for entry in offsets or [{"partition": {"server": prefix}, "offset": {}}]:
        kept = {
            k: v
            for k, v in (entry.get("offset") or {}).items()
            if k not in STALE_OFFSET_KEYS and not k.startswith(STALE_OFFSET_PREFIX)
        }
        kept.update(dict.fromkeys(OFFSET_LSNS, lsn))
        kept.setdefault("ts_usec", int(time.time() * 1_000_000))
        entries.append({"partition": entry["partition"], "offset": kept})
    return {"offsets": entries}


def old_transactions_over(source: Source, xmax: int, timeout_s: float) -> bool:
    """Until every transaction begun before the re-sync's slot was made has ended (False when
    one still runs after `timeout_s`): a change it made carries an LSN below the slot's start,
    and its row may not exist at the source until it commits."""
    with pg.connect(source.dsn(), autocommit=True) as conn:

        def over() -> bool:
            row = conn.execute(
                "SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint >= %s", (xmax,)
            ).fetchone()
            return bool(row and row[0])

        return wait_until(over, timeout_s, interval_s=1.0)


def _running(api: ConnectApi, connector: str) -> bool:
    state = connector_state(api, connector)
    return bool(
        state["connector"] == "RUNNING"
        and state["tasks"]
        and all(t == "RUNNING" for t in state["tasks"])
    )
