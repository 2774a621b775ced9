"""Where the source Postgres runs, as far as preparing it for capture differs: who may give a
role the right to replicate, and how logical decoding is switched on.

A managed service keeps superuser to itself and hands the customer's admin a role of its own:
Amazon RDS and Aurora `rds_superuser`, which cannot set the REPLICATION attribute but can grant
the `rds_replication` role; Google Cloud SQL `cloudsqlsuperuser` and Azure Database for
PostgreSQL `azure_pg_admin`, whose members may give the REPLICATION attribute. Each turns logical
decoding on by a setting of its own, never by `ALTER SYSTEM`. The service is told by those roles'
presence in `pg_roles`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from psycopg import sql

from changelake.exceptions import ConfigError


@dataclass(frozen=True)
class Platform:
    name: str
    admin_role: str | None  # the role the service gives its customer's admin; None: superuser
    replication_role: str | None  # a role granting replication, where the attribute is refused
    enable_logical: str  # how to set wal_level = logical there

    def create_role(self, role: str, password: str) -> list[sql.Composed]:
        """The statements creating the connector's login role, able to replicate and no more."""
        if self.replication_role is None:
            return [
                sql.SQL("CREATE ROLE {} LOGIN REPLICATION PASSWORD {}").format(
                    sql.Identifier(role), sql.Literal(password)
                )
            ]
        return [
            sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                sql.Identifier(role), sql.Literal(password)
            ),
            self._grant(role),
        ]

    def ensure_role(self, role: str) -> list[sql.Composed]:
        """The statements bringing an existing role to what `create_role` makes."""
        if self.replication_role is None:
            return [
                sql.SQL("ALTER ROLE {} WITH LOGIN REPLICATION NOCREATEDB NOCREATEROLE").format(
                    sql.Identifier(role)
                )
            ]
        return [
            sql.SQL("ALTER ROLE {} WITH LOGIN NOCREATEDB NOCREATEROLE").format(
                sql.Identifier(role)
            ),
            self._grant(role),
        ]

    def _grant(self, role: str) -> sql.Composed:
        assert self.replication_role is not None
        return sql.SQL("GRANT {} TO {}").format(
            sql.Identifier(self.replication_role), sql.Identifier(role)
        )

    @property
    def replication(self) -> str:
        """What the role is given, as the log says it."""
        return f"role {self.replication_role}" if self.replication_role else "REPLICATION"


SELF_MANAGED = Platform(
    "PostgreSQL",
    None,
    None,
    "ALTER SYSTEM SET wal_level = logical; then restart the server",
)
PLATFORMS = (
    Platform(
        "Amazon RDS / Aurora",
        "rds_superuser",
        "rds_replication",
        "set rds.logical_replication = 1 in the instance's (or cluster's) parameter group, "
        "then reboot it",
    ),
    Platform(
        "Google Cloud SQL",
        "cloudsqlsuperuser",
        None,
        "set the database flag cloudsql.logical_decoding = on "
        "(gcloud sql instances patch INSTANCE --database-flags=cloudsql.logical_decoding=on)",
    ),
    Platform(
        "Azure Database for PostgreSQL",
        "azure_pg_admin",
        None,
        "set the server parameter wal_level = logical (az postgres flexible-server parameter "
        "set --name wal_level --value logical), then restart the server",
    ),
)


def detect(roles: Iterable[str]) -> Platform:
    """The platform whose admin role the server has (`roles`: the names in pg_roles)."""
    present = set(roles)
    return next((p for p in PLATFORMS if p.admin_role in present), SELF_MANAGED)


def check_wal_level(platform: Platform, wal_level: str) -> None:
    """Logical decoding must be on before anything is prepared: a slot cannot be made without."""
    if wal_level != "logical":
        raise ConfigError(
            f"the database's wal_level is {wal_level}, and capture needs logical ({platform.name})",
            f"{platform.enable_logical}; nothing was changed",
        )
