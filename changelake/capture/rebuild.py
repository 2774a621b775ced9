"""Capture a connector's database again from nothing: for a source restored from a backup (its WAL
behind what the lake applied) or replaced by another server (another system identifier). Nothing
captured before can be trusted then: the slot, Connect's stored offset and the topics' compacted
records all describe a database that no longer exists, and a re-sync would keep the topics' rows
the restore took away. So the connector, its offsets and its slot go, its tables' topics (and its
transaction topic) are deleted, and its file is applied again: a new slot, an initial snapshot of
what the database holds now, the new database remembered as the connector's.

Before anything is removed, the tables to make again are written down (`rebuild.json` in the run
directory): from then on every run drops and snapshots each of them before applying anything, so
that a rebuild stopped halfway never lets a run read the new topics from the old tables' offsets.
A rebuild run again goes on from where the last one stopped."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

from changelake import jsonfile, kafka_io, pg
from changelake.capture import connectors, removal
from changelake.capture.caught_up import wait_caught_up
from changelake.capture.connect_api import ConnectApi
from changelake.capture.connectors import ConnectorFile, Progress
from changelake.capture.source import Source, source_of
from changelake.capture.source_checks import DEFAULT_SLOT
from changelake.exceptions import ChangelakeError, ConfigError
from changelake.settings import Settings
from changelake.waiting import wait_until

MARKER = "rebuild.json"
_MARKING = threading.Lock()
TOPICS_GONE_WITHIN_S = 60.0
SLOT_MADE_WITHIN_S = 120.0
# The new snapshot is read before the run takes it from the topics: minutes for a big database.
SNAPSHOT_WITHIN_S = 3600.0
AGAIN = "`changelake connectors rebuild {}` again goes on from here"


def connector_file(settings: Settings, name: str) -> ConnectorFile:
    """The file `connectors apply` reads for `name`: checked before anything is removed, since
    the rebuild applies it again."""
    for path in connectors.default_files(settings):
        loaded, problems = connectors.load(path)
        if loaded is not None and loaded.name == name:
            return loaded
        if loaded is None and path.stem == name:
            raise ConfigError("\n".join(str(p) for p in problems), "nothing was changed")
    raise ConfigError(
        f"no connector file in {settings.connectors_dir} names connector {name!r}",
        "nothing was changed; a rebuild applies the connector's file again",
    )


def marked(run_dir: Path) -> set[str]:
    """The derived tables a rebuild asked to be made again, not made yet."""
    path = run_dir / MARKER
    return set(jsonfile.read(path)) if path.exists() else set()


def mark(run_dir: Path, tables: Sequence[str]) -> None:
    with _MARKING:
        jsonfile.write_atomically(run_dir / MARKER, sorted(marked(run_dir) | set(tables)))


def unmark(run_dir: Path, table: str) -> None:
    """`table` made again from its new topic."""
    with _MARKING:  # tables of one run are made side by side, each reading and writing the file
        if table in (left := marked(run_dir)):
            jsonfile.write_atomically(run_dir / MARKER, sorted(left - {table}))


def recapture(
    settings: Settings, cf: ConnectorFile, topics: Sequence[str], progress: Progress = print
) -> None:
    """The connector, its offsets and its slot removed, `topics` (its tables') and its
    transaction topic deleted, its file applied again; returns once Debezium has snapshotted the
    database into the new topics."""
    api = ConnectApi(settings.connect_url)
    connectors.check(settings, api, [cf.path])  # what apply would refuse, refused before
    source = source_of(settings, cf.config)
    slot = cf.config.get("slot.name") or DEFAULT_SLOT
    if api.connector_config(cf.name) is not None:
        removal.delete(settings, cf.name, drop_slot=True, progress=progress)
    else:  # removed by a rebuild that stopped after it (its offsets with it)
        removal.drop_replication_slot(source, slot)
        progress(f"  {cf.name:<20} not in Kafka Connect; replication slot {slot} dropped if left")
    prefix = cf.config.get("topic.prefix", "")
    _delete_topics(settings, cf.name, [*topics, f"{prefix}.transaction"], progress)
    try:
        connectors.apply(settings, [cf.path], progress=progress)
        _wait_snapshotted(source, slot, progress)
    except ChangelakeError as exc:  # its own advice, and that a rebuild goes on from here
        hint = "; then ".join(h for h in (exc.hint, AGAIN.format(cf.name)) if h)
        raise ChangelakeError(exc.message, hint) from exc


def _delete_topics(settings: Settings, name: str, topics: list[str], progress: Progress) -> None:
    bootstrap = settings.kafka_bootstrap
    present = sorted(set(topics) & set(kafka_io.list_topics(bootstrap)))
    kafka_io.delete_topics(bootstrap, present)
    # Kafka deletes asynchronously: a snapshot written before the old topic is gone is lost.
    if not wait_until(
        lambda: not set(present) & set(kafka_io.list_topics(bootstrap)), TOPICS_GONE_WITHIN_S
    ):
        raise ChangelakeError(
            f"Kafka had not deleted topics {', '.join(present)} within {TOPICS_GONE_WITHIN_S:.0f}s",
            AGAIN.format(name),
        )
    for topic in present:
        progress(f"  {topic} deleted, with the records of the database it captured before")


def _wait_snapshotted(source: Source, slot: str, progress: Progress) -> None:
    """Until Debezium has sent its snapshot. A new slot confirms nothing while the snapshot is
    read, and on a quiet database the server's present position can be the slot's own start:
    so a WAL record is written after the slot was made (a logical message, which any role may
    write), and the wait is for the slot to confirm past it."""
    with pg.connect(source.dsn(), autocommit=True) as conn:

        def made() -> bool:
            query = "SELECT 1 FROM pg_replication_slots WHERE slot_name = %s"
            return conn.execute(query, (slot,)).fetchone() is not None

        if not wait_until(made, SLOT_MADE_WITHIN_S, interval_s=0.5):
            raise ChangelakeError(
                f"Debezium made no replication slot {slot} within {SLOT_MADE_WITHIN_S:.0f}s",
                "see `changelake connectors status` and logs/connect.log",
            )
        conn.execute("SELECT pg_logical_emit_message(false, 'changelake', 'rebuild')")
    progress("  waiting for Debezium's snapshot of the database as it is now")
    wait_caught_up(source, slot, SNAPSHOT_WITHIN_S, say=progress)
