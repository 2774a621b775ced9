"""Each replication slot as `status` reports it (the WAL it holds back, whether a connector reads
it) and the warnings a slot holding too much earns; read from each slot's source database as its
connector's user."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import psycopg

from changelake.exceptions import ConfigError, first_line
from changelake.settings import SLOT_LAG_WARN_VAR, Settings
from changelake.tables import TableRef, slot_tables, source_of_table

SLOT_SQL = (  # the WAL a slot holds back (bytes), and whether a reader has it
    "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn), active"
    " FROM pg_replication_slots WHERE slot_name = %s"
)


def slots_of(settings: Settings, refs: list[TableRef], problems: list[str]) -> dict[str, Any]:
    """Per replication slot: WAL bytes not yet confirmed by Debezium, and whether it is read;
    read from each slot's source database as its connector's user."""
    found = {}
    for name, ref in slot_tables(refs).items():
        try:
            source = source_of_table(settings, ref)
            with psycopg.connect(source.dsn(), connect_timeout=3) as conn:
                found[name] = _slot(conn, name)
        except ConfigError as exc:  # e.g. a password variable not set here
            problems.append(f"postgres: cannot read replication slot {name}: {exc.message}")
            found[name] = {"exists": None, "slot_lag_bytes": None, "active": None}
        except psycopg.Error as exc:
            problems.append(
                f"postgres: cannot read replication slot {name} at {source.where()}: "
                f"{first_line(exc)}"
            )
            found[name] = {"exists": None, "slot_lag_bytes": None, "active": None}
    return found


def _slot(conn: psycopg.Connection[Any], name: str) -> dict[str, Any]:
    row = conn.execute(SLOT_SQL, (name,)).fetchone()
    if row is None:  # the connector has not created it yet
        return {"exists": False, "slot_lag_bytes": None, "active": False}
    lag, active = row
    return {
        "exists": True,
        "slot_lag_bytes": int(lag) if lag is not None else None,
        "active": bool(active),
    }


def slot_warnings(
    slots: dict[str, Any], threshold: int, owners: Mapping[str, str] | None = None
) -> list[str]:
    """One warning per slot holding more unconfirmed WAL than `threshold` bytes, saying what to do.

    `slots` is what `slots_of` read; a slot of unknown lag (Postgres down, not created yet) is
    skipped, its own line already says why. `owners` maps a slot to the connector that reads it.
    """
    warnings = []
    for name, slot in sorted(slots.items()):
        lag = slot.get("slot_lag_bytes")
        if lag is None or lag <= threshold:
            continue
        connector = (owners or {}).get(name) or "NAME"
        head = (
            f"slot {name} holds {byte_size(lag)} of WAL Debezium has not confirmed,"
            f" over the {byte_size(threshold)} set by {SLOT_LAG_WARN_VAR}"
        )
        # The slot advances when Connect commits the connector's offsets to Kafka; `changelake
        # run` reads Kafka, not the slot, so it is never the cause and not worth sending anyone to.
        if slot.get("active"):
            cause = (
                f"{connector} reads it but confirms slowly: check its tasks with"
                " `changelake connectors status` and that Kafka is up; the lag should shrink"
            )
        else:
            cause = (
                "it is INACTIVE, no connector is reading it: `changelake connectors status` shows"
                f" whether {connector} failed or is gone (fix it, then `changelake connectors"
                f" apply`); if it is not wanted any more, `changelake connectors delete"
                f" {connector} --drop-slot` or in psql SELECT pg_drop_replication_slot('{name}')"
            )
        warnings.append(
            f"{head}. {cause}. Past max_slot_wal_keep_size (4GB locally, 2GB under docker"
            " compose) Postgres invalidates the slot and the connector must snapshot again"
            " (docs/capture.md)"
        )
    return warnings


def byte_size(n: int | None) -> str:
    """A byte count as people read it (`1.5 GiB`)."""
    if n is None:
        return "? bytes"
    if n < 1024:
        return f"{n} bytes"
    size = n / 1024
    for unit in ("KiB", "MiB"):
        if size < 1024:
            return f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"
