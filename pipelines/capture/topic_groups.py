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


def cleanup_policy(config: Mapping[str, str], topic: str) -> str:
    """The cleanup.policy Connect creates `topic` with (Kafka's default, delete, when unset)."""
    group = group_of(config, topic)
    policy = config.get(f"{PREFIX}{group}.cleanup.policy")
    if policy is None and group != "default":  # a group's unset properties are the default's
        policy = config.get(f"{PREFIX}default.cleanup.policy")
    return policy or "delete"


def is_event_topic(config: Mapping[str, str], topic: str) -> bool:
    """Whether a table's changes go to a topic that is not compacted (an event table)."""
    return "compact" not in cleanup_policy(config, topic).replace(" ", "").split(",")


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
