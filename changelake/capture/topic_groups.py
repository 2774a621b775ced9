"""Which cleanup policy Kafka Connect's topic creation gives a topic, read from a connector's
config as Connect reads it: the groups in `topic.creation.groups` in order, the first whose
`include` regexes match the topic and whose `exclude` ones do not, else `default`.

A table whose topic is not compacted is derived as an append-only **event table**: its topic
keeps every change only for its retention, so no newest-per-key state can be rebuilt from it,
and a table without a primary key (whose changes have no Kafka key, which a compacted topic
refuses) can only be captured so.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

PREFIX = "topic.creation."
EVENTS_GROUP = "events"  # the group `connectors init` writes for key-less tables
EVENTS_RETENTION_MS = str(7 * 24 * 3600 * 1000)  # Kafka keeps an event table's changes a week


def _patterns(value: str) -> list[re.Pattern[str]]:
    return [re.compile(p.strip()) for p in value.split(",") if p.strip()]


def topic_of(config: Mapping[str, str], table: str) -> str:
    """Debezium's topic for `table` (schema.table): `<topic.prefix>.<schema>.<table>`."""
    return f"{config.get('topic.prefix', '')}.{table}"


def group_of(config: Mapping[str, str], topic: str) -> str:
    """The topic creation group `topic` falls in (`default` when none other matches)."""
    for group in (g.strip() for g in config.get(f"{PREFIX}groups", "").split(",")):
        if not group:
            continue
        include = _patterns(config.get(f"{PREFIX}{group}.include", ""))
        exclude = _patterns(config.get(f"{PREFIX}{group}.exclude", ""))
        # Connect matches a whole topic name (Java's Matcher.matches), hence fullmatch.
        if any(p.fullmatch(topic) for p in include) and not any(
            p.fullmatch(topic) for p in exclude
        ):
            return group
    return "default"


def creation_settings(
    config: Mapping[str, str], topic: str, skip: tuple[str, ...] = ()
) -> dict[str, str]:
    """The topic configs Connect creates `topic` with: its group's, over the default's."""
    group = group_of(config, topic)
    found: dict[str, str] = {}
    for source in dict.fromkeys(("default", group)):  # the group's own settings win
        head = f"{PREFIX}{source}."
        for key, value in config.items():
            name = key.removeprefix(head)
            if key.startswith(head) and name not in skip and name not in ("include", "exclude"):
                found[name] = value
    return found


def cleanup_policy(config: Mapping[str, str], topic: str) -> str | None:
    """The cleanup.policy Connect creates `topic` with; None when the file sets none."""
    return creation_settings(config, topic).get("cleanup.policy")


def is_event_topic(config: Mapping[str, str], topic: str) -> bool:
    """Whether a table's changes go to a topic the file has created uncompacted (an event
    table). A file that sets no cleanup.policy for it (its topics made by hand, or by a broker
    default) keeps the table keyed: an event table is always asked for."""
    asked = cleanup_policy(config, topic)
    return asked is not None and "compact" not in asked.replace(" ", "").split(",")


def events_group(prefix: str, tables: list[str]) -> dict[str, str]:
    """Connector settings that create the topics of `tables` (schema.table) uncompacted."""
    include = "|".join(re.escape(f"{prefix}.{t}") for t in tables)
    return {
        f"{PREFIX}{EVENTS_GROUP}.include": include,
        f"{PREFIX}{EVENTS_GROUP}.replication.factor": "1",
        f"{PREFIX}{EVENTS_GROUP}.partitions": "1",
        f"{PREFIX}{EVENTS_GROUP}.cleanup.policy": "delete",
        f"{PREFIX}{EVENTS_GROUP}.retention.ms": EVENTS_RETENTION_MS,
    }
