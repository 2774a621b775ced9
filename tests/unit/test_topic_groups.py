"""Which tables are event tables: Connect's topic creation groups read as Connect reads them
(first matching group, whole-name regexes, exclusions, a group's unset policy the default's)."""

from __future__ import annotations

from changelake import jsonfile
from changelake.capture.topic_groups import (
    cleanup_policy,
    creation_settings,
    events_group,
    group_of,
    is_event_topic,
)
from changelake.settings import project_root


def test_the_shop_connector_compacts_its_tables_and_not_its_metadata() -> None:
    config = jsonfile.read(project_root() / "connectors" / "shop-postgres.json")["config"]
    assert not is_event_topic(config, "shop.public.orders")
    assert group_of(config, "shop.transaction") == "meta"
    assert is_event_topic(config, "shop.transaction")
    assert is_event_topic(config, "__debezium-heartbeat.shop")
    assert not is_event_topic(config, "shop.transactions")  # a whole name, not a prefix


def test_the_first_group_that_includes_and_does_not_exclude_a_topic_gives_its_policy() -> None:
    config = {
        "topic.creation.default.cleanup.policy": "compact",
        "topic.creation.groups": "logs, all",
        "topic.creation.logs.include": r"p\.public\.log.*",
        "topic.creation.logs.exclude": r"p\.public\.log_keyed",
        "topic.creation.logs.cleanup.policy": "delete",
        "topic.creation.all.include": ".*",  # no policy: the default's
    }
    assert cleanup_policy(config, "p.public.log_2026") == "delete"
    assert group_of(config, "p.public.log_keyed") == "all"
    assert cleanup_policy(config, "p.public.log_keyed") == "compact"
    assert not is_event_topic(
        {**config, "topic.creation.all.cleanup.policy": "compact,delete"}, "x"
    )
    assert not is_event_topic({}, "p.public.t")  # no policy asked for: keyed, as always


def test_the_group_init_writes_makes_exactly_its_tables_event_tables() -> None:
    config = {
        "topic.prefix": "own",
        "topic.creation.default.cleanup.policy": "compact",
        "topic.creation.groups": "events",
        **events_group("own", ["inv.audit", "public.log$"]),
    }
    assert is_event_topic(config, "own.inv.audit")
    assert is_event_topic(config, "own.public.log$")  # escaped: a table name is no regex
    assert not is_event_topic(config, "own.inv.auditx")
    assert not is_event_topic(config, "own.inv.stock")


def test_an_existing_topic_is_given_its_own_groups_settings_over_the_defaults() -> None:
    config = {
        "topic.prefix": "own",
        "topic.creation.default.cleanup.policy": "compact",
        "topic.creation.default.min.compaction.lag.ms": "86400000",
        "topic.creation.default.partitions": "1",
        "topic.creation.groups": "events",
        **events_group("own", ["inv.audit"]),
    }
    skip = ("replication.factor", "partitions")
    audit = creation_settings(config, "own.inv.audit", skip)
    assert audit["cleanup.policy"] == "delete"  # never made compacted by `connectors apply`
    assert "include" not in audit and "partitions" not in audit
    assert creation_settings(config, "own.inv.stock", skip) == {
        "cleanup.policy": "compact",
        "min.compaction.lag.ms": "86400000",
    }
