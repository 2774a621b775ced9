"""Which Postgres a connector was applied to: its system identifier (made by `initdb`, kept by
the cluster's standbys and by a restore of its base backup; another for a new server, or a dump
restored into one) and its timeline (a standby's promotion, or a point-in-time recovery, starts
a new one).

Remembered in the run directory when `connectors apply` binds a connector to its database, so
that `status` and the run can tell "the slot was dropped" from "the database is not the one the
lake was built from" (a restore) or "a standby took over" (a failover, which before PostgreSQL
17 leaves logical slots behind on the old primary).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from changelake import jsonfile
from changelake.capture.source import source_of
from changelake.settings import Settings

if TYPE_CHECKING:  # imported when used: `changelake query` reads this module, never connects
    import psycopg

FILE = "sources.json"
# pg_control_* are executable by every role (no superuser needed, unlike reading the data dir).
IDENTITY_SQL = (
    "SELECT (SELECT system_identifier FROM pg_control_system())::text,"
    " (SELECT timeline_id FROM pg_control_checkpoint())"
)


@dataclass(frozen=True)
class Identity:
    system_identifier: str
    timeline: int


def identity_of(conn: psycopg.Connection[Any]) -> Identity:
    row = conn.execute(IDENTITY_SQL).fetchone()
    assert row is not None  # a SELECT without FROM has one row
    return Identity(str(row[0]), int(row[1]))


def remembered(run_dir: Path) -> dict[str, Identity]:
    """Per connector, the database `connectors apply` last bound it to (none: applied before
    changelake kept this, or the run directory is new)."""
    try:
        doc = jsonfile.read(run_dir / FILE)
    except Exception:  # none yet, or unreadable: nothing known, nothing compared
        return {}
    found = {}
    for name, entry in doc.items() if isinstance(doc, dict) else []:
        try:
            found[name] = Identity(str(entry["system_identifier"]), int(entry["timeline"]))
        except (KeyError, TypeError, ValueError):
            continue
    return found


def remember(run_dir: Path, connector: str, identity: Identity | None) -> None:
    """Record `identity` as `connector`'s database (None: forget it, the connector is gone)."""
    known = {n: i.__dict__ for n, i in remembered(run_dir).items() if n != connector}
    if identity is not None:
        known[connector] = identity.__dict__
    if known or (run_dir / FILE).exists():
        jsonfile.write_atomically(run_dir / FILE, known)


def bind(settings: Settings, connector: str, config: Mapping[str, str], fresh: bool) -> None:
    """Remember the database `connector` is applied to: when `fresh` (created, or its settings
    changed), or when none is remembered yet. One that does not answer is not remembered (the
    checks that compare with it are skipped), not an error: `connectors apply` already checked
    it."""
    if not fresh and connector in remembered(settings.run_dir):
        return
    import psycopg

    source = source_of(settings, config)
    try:
        with psycopg.connect(source.dsn(), connect_timeout=5, autocommit=True) as conn:
            identity = identity_of(conn)
    except psycopg.Error:
        return
    remember(settings.run_dir, connector, identity)
