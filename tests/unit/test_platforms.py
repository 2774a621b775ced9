"""`connectors init` on managed Postgres: the service told by its admin role, the SQL that gives
the connector's role the right to replicate there, and wal_level checked first (a real managed
database cannot run here, so the SQL itself is what is checked)."""

from __future__ import annotations

import pytest
from psycopg import sql

from changelake.capture.platforms import (
    PLATFORMS,
    SELF_MANAGED,
    Platform,
    check_wal_level,
    detect,
)
from changelake.exceptions import ConfigError

BUILT_IN = ["postgres", "pg_monitor", "pg_read_all_data", "debezium"]
RDS, CLOUD_SQL, AZURE = PLATFORMS


def sqls(statements: list[sql.Composed]) -> list[str]:
    return [s.as_string(None) for s in statements]


def test_the_service_is_told_by_its_admin_role() -> None:
    assert detect(BUILT_IN) is SELF_MANAGED
    assert detect([*BUILT_IN, "rds_superuser", "rds_replication"]) is RDS
    assert detect([*BUILT_IN, "cloudsqlsuperuser"]) is CLOUD_SQL
    assert detect([*BUILT_IN, "azure_pg_admin"]) is AZURE


def test_rds_grants_rds_replication_since_its_admin_cannot_give_the_attribute() -> None:
    assert sqls(RDS.create_role("debezium", "s3cret")) == [
        "CREATE ROLE \"debezium\" LOGIN PASSWORD 's3cret'",
        'GRANT "rds_replication" TO "debezium"',
    ]
    assert sqls(RDS.ensure_role("debezium")) == [
        'ALTER ROLE "debezium" WITH LOGIN NOCREATEDB NOCREATEROLE',
        'GRANT "rds_replication" TO "debezium"',
    ]
    assert RDS.replication == "role rds_replication"


@pytest.mark.parametrize("platform", [SELF_MANAGED, CLOUD_SQL, AZURE])
def test_elsewhere_the_role_gets_the_replication_attribute(platform: Platform) -> None:
    assert sqls(platform.create_role("debezium", "it's")) == [
        "CREATE ROLE \"debezium\" LOGIN REPLICATION PASSWORD 'it''s'"
    ]
    assert sqls(platform.ensure_role("debezium")) == [
        'ALTER ROLE "debezium" WITH LOGIN REPLICATION NOCREATEDB NOCREATEROLE'
    ]


def test_wal_level_must_be_logical_and_the_error_says_how_there() -> None:
    check_wal_level(RDS, "logical")
    with pytest.raises(ConfigError) as refused:
        check_wal_level(RDS, "replica")
    assert "wal_level is replica, and capture needs logical (Amazon RDS / Aurora)" in str(
        refused.value
    )
    assert "rds.logical_replication = 1" in str(refused.value.hint)
    for platform, how in [
        (CLOUD_SQL, "cloudsql.logical_decoding=on"),
        (AZURE, "--name wal_level --value logical"),
        (SELF_MANAGED, "ALTER SYSTEM SET wal_level = logical"),
    ]:
        with pytest.raises(ConfigError) as refused:
            check_wal_level(platform, "replica")
        assert how in str(refused.value.hint)
