"""Slot trouble: why a connector's replication slot cannot give it the changes it has not read,
named in one sentence with what to do, before anyone has to read Debezium's trace.

What production does to a slot: drops it (by hand, or with its connector); invalidates it once
it holds more WAL than `max_slot_wal_keep_size` (`wal_status = 'lost'`); leaves it behind on the
old primary in a failover (before PostgreSQL 17 logical slots are not kept on standbys); and a
restore gives back a database whose WAL is behind what the lake applied, or another database
altogether. A slot re-created after a drop starts at the WAL of that moment, after the offset
Connect stored: the changes between were never decoded. Each is a `Stall` (capture_health) of the
tables the connector feeds, so `status`, the run and `/metrics` show it the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import psycopg

from changelake.capture.capture_health import Stall
from changelake.capture.connect_api import ConnectApi, quote
from changelake.capture.failures import RESYNC_STEP
from changelake.capture.source_checks import DEFAULT_SLOT
from changelake.capture.source_identity import Identity, identity_of, remembered
from changelake.pg import pg_lsn
from changelake.settings import Settings
from changelake.tables import TableRef, source_of_table

# The slot as Postgres has it (no row: no such slot), and where the server's WAL is now. Read
# through to_jsonb so that columns newer servers add (invalidation_reason, 17) read as NULL on
# older ones instead of failing the query.
LOOK_SQL = (
    "SELECT s IS NOT NULL, pg_wal_lsn_diff((s->>'confirmed_flush_lsn')::pg_lsn, '0/0')::bigint,"
    " s->>'wal_status', s->>'invalidation_reason', coalesce((s->>'active')::boolean, false),"
    " pg_wal_lsn_diff(CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn()"
    " ELSE pg_current_wal_lsn() END, '0/0')::bigint"
    " FROM (SELECT (SELECT to_jsonb(r) FROM pg_replication_slots r WHERE slot_name = %s) AS s) q"
)


def rebuild(connector: str) -> str:
    """What a restored or replaced source needs: the lake made again from it."""
    return (
        "stop `changelake run` before it mixes the two databases' changes, then make the lake"
        f" again from this one: `changelake connectors rebuild {connector}`"
    )


@dataclass(frozen=True)
class SlotLook:
    """One read of a slot's source: the slot (exists False: there is none), and the server."""

    slot: str
    where: str  # host:port/db, for the sentence
    exists: bool
    confirmed_lsn: int | None
    wal_status: str | None
    invalidation_reason: str | None
    active: bool  # a connector reads it now
    current_lsn: int | None  # None: a standby that replayed nothing yet
    identity: Identity | None  # None: the service does not let this role read pg_control_*


def look_at(conn: psycopg.Connection[Any], slot: str, where: str) -> SlotLook:
    """One read (`conn` in autocommit: a refused identity leaves it usable)."""
    row = conn.execute(LOOK_SQL, (slot,)).fetchone()
    assert row is not None  # a SELECT of one row
    exists, confirmed, wal_status, reason, active, current = row
    try:
        identity: Identity | None = identity_of(conn)
    except psycopg.Error:  # the identity checks are skipped, the slot's are not
        identity = None
    return SlotLook(
        slot, where, bool(exists), confirmed, wal_status, reason, bool(active), current, identity
    )


def trouble_of(
    connector: str,
    look: SlotLook,
    offset_lsn: int | None,
    lake_lsn: int | None,
    known: Identity | None,
) -> Stall | None:
    """Why the slot cannot serve `connector` (None: it can, as far as one look tells).

    `offset_lsn`: where Connect stored that the connector stopped (None: unknown, or it never
    streamed); `lake_lsn`: the highest LSN the lake applied from this source; `known`: the
    database `connectors apply` bound the connector to (None: not recorded)."""
    slot, where, now = look.slot, look.where, look.identity
    if known is None or now is None:  # nothing to compare the server with
        known = now = None
    if known is not None and now is not None and now.system_identifier != known.system_identifier:
        return Stall(
            connector,
            f"{where} is not the database {connector} was applied to (system identifier"
            f" {now.system_identifier}, was {known.system_identifier}): a new server or a dump"
            " restored into one, so the lake holds rows and changes this database may not have",
            rebuild(connector),
            "source_replaced",
        )
    if lake_lsn is not None and look.current_lsn is not None and look.current_lsn < lake_lsn:
        return Stall(
            connector,
            f"{where} is at WAL {pg_lsn(look.current_lsn)}, behind {pg_lsn(lake_lsn)} which the"
            " lake already applied: the database was restored to an earlier point (or a standby"
            " that lagged took over), so the lake holds changes it no longer has",
            rebuild(connector),
            "source_behind_lake",
        )
    if not look.exists:
        if offset_lsn is None and lake_lsn is None:
            return None  # the connector has not created it yet
        since = f" since {pg_lsn(offset_lsn)}" if offset_lsn is not None else ""
        if known is not None and now is not None and now.timeline != known.timeline:
            return Stall(
                connector,
                f"replication slot {slot} is gone: {where} moved to timeline {now.timeline}"
                f" (it was on {known.timeline} when {connector} was applied), a standby took over"
                " and, before PostgreSQL 17, logical slots stay behind on the old primary; the"
                f" changes{since} were not captured",
                RESYNC_STEP,
                "failover",
            )
        return Stall(
            connector,
            f"replication slot {slot} is gone from {where} (dropped), so the changes{since}"
            " cannot be captured",
            RESYNC_STEP,
            "slot_missing",
        )
    if look.wal_status == "lost" or look.invalidation_reason:
        why = look.invalidation_reason or "wal_status lost"
        held = why in ("wal_status lost", "wal_removed")
        return Stall(
            connector,
            f"replication slot {slot} on {where} was invalidated ({why})"
            + (
                ": Postgres removed WAL it held, once it held more than"
                " max_slot_wal_keep_size, so the changes in that WAL cannot be captured"
                if held
                else ", so the changes it held back cannot be captured"
            ),
            RESYNC_STEP,
            "slot_invalidated",
        )
    # While a connector reads the slot, Debezium may flush it past the offset Connect stored
    # last (records acked during the offset commit) until the next commit: no sign of anything.
    confirmed = look.confirmed_lsn
    if look.active or offset_lsn is None or confirmed is None:
        return None
    if confirmed > offset_lsn:
        return Stall(
            connector,
            f"replication slot {slot} on {where} starts at {pg_lsn(confirmed)}, after"
            f" {pg_lsn(offset_lsn)} where {connector} stopped: it was dropped and created again,"
            " so the changes between were never captured",
            RESYNC_STEP,
            "slot_recreated",
        )
    return None


def stored_lsn(offsets: Any) -> int | None:
    """The furthest LSN in the body of Connect's GET /connectors/NAME/offsets (None: none).
    A slot no connector reads that is past all of them was made anew (while one reads it,
    Debezium may flush it past them until Connect's next offset commit: see trouble_of)."""
    found = [
        int(value)
        for entry in (offsets or {}).get("offsets") or []
        for key, value in (entry.get("offset") or {}).items()
        if key in ("lsn", "lsn_proc", "lsn_commit") and value is not None
    ]
    return max(found, default=None)


def slot_troubles(
    settings: Settings,
    refs: list[TableRef],
    lake_lsns: Mapping[str, int | None],
) -> dict[str, Stall]:
    """Per connector whose slot is in trouble, why. `lake_lsns`: per table, the highest LSN
    applied. A source or Connect that does not answer is no trouble found: this look must not
    invent one (`status` has its own problem line for each service that does not answer)."""
    known = remembered(settings.run_dir)
    api = ConnectApi(settings.connect_url, timeout_s=10.0)
    found = {}
    # Per connector, not per slot name: two servers may each have a slot of one name.
    for connector in sorted({r.connector for r in refs}):
        fed = [r for r in refs if r.connector == connector]
        slot = fed[0].slot or DEFAULT_SLOT
        applied = [v for r in fed if (v := lake_lsns.get(r.name)) is not None]
        try:
            source = source_of_table(settings, fed[0])
            with psycopg.connect(source.dsn(), connect_timeout=3, autocommit=True) as conn:
                look = look_at(conn, slot, source.where())
            offset = stored_lsn(api.get(f"/connectors/{quote(connector)}/offsets"))
        # Anything: a service away, a body not as expected. The caller (status, the run's loop)
        # must go on; what does not answer has its own problem line in `status`.
        except Exception:
            continue
        trouble = trouble_of(
            connector, look, offset, max(applied, default=None), known.get(connector)
        )
        if trouble is not None:
            found[connector] = trouble
    return found
