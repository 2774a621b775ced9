"""Capture a connector's database again from nothing: for a source restored from a backup (its WAL
behind what the lake applied) or replaced by another server (another system identifier). Nothing
captured before can be trusted then: the slot, Connect's stored offset and the topics' compacted
records all describe a database that no longer exists, and a re-sync would keep the topics' rows
the restore took away. So the connector, its offsets and its slot go, its tables' topics are
deleted, and its file is applied again: a new slot, an initial snapshot of what the database
holds now, the new database remembered as the connector's."""

from __future__ import annotations

from collections.abc import Sequence

from changelake import kafka_io
from changelake.capture import connectors, removal
from changelake.capture.caught_up import wait_caught_up
from changelake.capture.connect_api import ConnectApi
from changelake.capture.connectors import ConnectorFile, Progress
from changelake.capture.source import source_of
from changelake.exceptions import ChangelakeError, ConfigError
from changelake.settings import Settings
from changelake.waiting import wait_until

TOPICS_GONE_WITHIN_S = 60.0
# The new snapshot is read before the run takes it from the topics: minutes for a big database.
SNAPSHOT_WITHIN_S = 3600.0


def connector_file(settings: Settings, name: str) -> ConnectorFile:
    """The file `connectors apply` reads for `name`: checked before anything is removed, since
    the rebuild applies it again."""
    for path in connectors.default_files(settings):
        loaded, _ = connectors.load(path)
        if loaded is not None and loaded.name == name:
            return loaded
    raise ConfigError(
        f"no connector file in {settings.connectors_dir} names connector {name!r}",
        "nothing was changed; a rebuild applies the connector's file again",
    )


def recapture(
    settings: Settings, cf: ConnectorFile, topics: Sequence[str], progress: Progress = print
) -> None:
    """The connector, its offsets and its slot removed, `topics` (its tables') deleted, its file
    applied again; returns once Debezium has snapshotted the database into the new topics."""
    if ConnectApi(settings.connect_url).connector_config(cf.name) is None:
        raise ConfigError(
            f"connector {cf.name} is not registered in Kafka Connect",
            "nothing was changed; `changelake connectors apply` registers it first",
        )
    removal.delete(settings, cf.name, drop_slot=True, progress=progress)
    _delete_topics(settings, list(topics), progress)
    connectors.apply(settings, [cf.path], progress=progress)
    slot = cf.config.get("slot.name")
    if slot:  # the snapshot is read once the slot confirms the present: streaming has begun
        wait_caught_up(source_of(settings, cf.config), slot, SNAPSHOT_WITHIN_S, say=progress)


def _delete_topics(settings: Settings, topics: list[str], progress: Progress) -> None:
    bootstrap = settings.kafka_bootstrap
    present = sorted(set(topics) & set(kafka_io.list_topics(bootstrap)))
    kafka_io.delete_topics(bootstrap, present)
    # Kafka deletes asynchronously: a snapshot written before the old topic is gone is lost.
    if not wait_until(
        lambda: not set(present) & set(kafka_io.list_topics(bootstrap)), TOPICS_GONE_WITHIN_S
    ):
        raise ChangelakeError(
            f"Kafka had not deleted topics {', '.join(present)} within {TOPICS_GONE_WITHIN_S:.0f}s",
            "the connector is removed and not applied again; run the rebuild again",
        )
    for topic in present:
        progress(f"  {topic:<20} deleted, with the rows of the database it captured before")
