"""`changelake connectors init`: prepare any Postgres database for capture, and write the
connector file for it.

Given a superuser's DSN once (used, never stored; on a managed service its admin's, see
capture/platforms.py), in *that* database, after checking that wal_level is logical: the
least-privilege login role (LOGIN and the right to replicate, nothing more), CONNECT, USAGE
and SELECT on the listed tables, changelake's heartbeat and signal tables
(schemas/changelake.sql) with write access to those only, and a publication of exactly those
tables. Everything is created or checked, so running it again changes nothing; all of it in one
transaction, so a refusal leaves nothing half-done. Then
the shipped connector file becomes this database's: its name, slot, publication, topic prefix and
tables. A table without a primary key is keyed by the columns `--key` names, or else captured as
an append-only event table (its topic created uncompacted: see capture/topic_groups.py).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from changelake import jsonfile
from changelake.capture import platforms, topic_groups
from changelake.capture.source_checks import PUBLISHED, exclusion, generated_columns
from changelake.exceptions import ConfigError
from changelake.settings import Settings

Progress = Callable[[str], None]
TEMPLATE = "shop-postgres.json"  # the shipped connector, in the checkout's connectors/
HEARTBEAT, SIGNAL = "changelake.heartbeat", "changelake.debezium_signal"
# What the connector writes: the heartbeat (its query), the signal table (incremental snapshots'
# window markers).
_WRITE_GRANTS = {HEARTBEAT: "SELECT, INSERT, UPDATE", SIGNAL: "SELECT, INSERT, UPDATE, DELETE"}
MAX_NAME = 63  # Postgres' identifier length (NAMEDATALEN - 1)
_SLOT_CHARS = re.compile(r"[^a-z0-9_]")


@dataclass(frozen=True)
class Request:
    name: str  # the connector's name; slot, publication and topic prefix derive from it
    admin_dsn: str
    tables: Sequence[str]  # schema.table
    keys: Mapping[str, Sequence[str]] = field(default_factory=dict)  # key-less table → columns
    role: str = "debezium"
    password: str = ""  # the role's, set when the role is created

    @property
    def slot(self) -> str:
        return _SLOT_CHARS.sub("_", self.name.lower())

    @property
    def publication(self) -> str:
        return f"changelake_{self.slot}"


def init(settings: Settings, request: Request, output: Path, progress: Progress = print) -> Path:
    """Prepare the database, then write the connector file to `output`; returns its path."""
    _check_names(request)
    try:
        with psycopg.connect(request.admin_dsn, connect_timeout=10) as conn:
            database = str(conn.info.dbname)
            # Where the connection went (PGHOST, PGPORT and service files included).
            server = (conn.info.host, str(conn.info.port))
            if output.exists():
                _refuse_other_file(output, request, database)
            with conn.transaction():
                events = _prepare(conn, settings, request, progress)
            generated = {
                t: columns for t, columns in generated_columns(conn).items() if t in request.tables
            }
            for table, columns in generated.items():
                progress(
                    f"  {table}: left out its generated column(s) {', '.join(columns)}: Postgres "
                    "before 18 does not replicate their values (the lake would hold them from the "
                    "snapshot only)"
                )
    except psycopg.OperationalError as exc:
        raise ConfigError(f"--admin-dsn: cannot connect: {str(exc).strip()}") from exc
    except psycopg.Error as exc:
        raise ConfigError(
            f"preparing the database failed, nothing was changed: {str(exc).strip()}",
            "the DSN must be a superuser's, or on a managed service its admin's (rds_superuser, "
            "cloudsqlsuperuser, azure_pg_admin): docs/managed-postgres.md",
        ) from exc
    doc = connector_file(settings, request, database, server, events, generated)
    jsonfile.write_atomically(output, doc)
    progress(f"  wrote {output}: apply it with `changelake connectors apply {output}`")
    return output


def _check_names(request: Request) -> None:
    if len(request.publication) > MAX_NAME:  # Postgres would cut it short, silently
        raise ConfigError(
            f"name {request.name!r}: too long for a slot and publication name "
            f"(changelake_{request.slot} must fit in {MAX_NAME} characters)"
        )
    bad = [t for t in request.tables if len(t.split(".")) != 2 or not all(t.split("."))]
    if bad:
        raise ConfigError(f"--tables: {bad[0]!r} is not schema.table")
    unlisted = sorted(set(request.keys) - set(request.tables))
    if unlisted:
        raise ConfigError(f"--key: {unlisted[0]} is not in --tables")


def _refuse_other_file(output: Path, request: Request, database: str) -> None:
    """An existing file is only rewritten when it is this connector's (same name, database)."""
    try:
        current = json.loads(output.read_text())
        same = current.get("name") == request.name and (
            current.get("config", {}).get("database.dbname") == database
        )
    except (OSError, ValueError, AttributeError):
        same = False
    if not same:
        raise ConfigError(
            f"{output}: exists and is not connector {request.name} of database {database}",
            "choose another --output, or remove that file",
        )


def _prepare(
    conn: psycopg.Connection[Any], settings: Settings, request: Request, progress: Progress
) -> list[str]:
    """Returns the tables captured as append-only event tables (no primary key, no --key)."""

    def run(statement: sql.Composed, said: str) -> None:
        conn.execute(statement)
        progress(f"  {said}")

    platform = platforms.detect(r[0] for r in conn.execute("SELECT rolname FROM pg_roles"))
    platforms.check_wal_level(platform, str(_one(conn, "SHOW wal_level")))
    events = _check_tables(conn, request)
    role = sql.Identifier(request.role)
    if _one(conn, "SELECT 1 FROM pg_roles WHERE rolname = %s", request.role) is None:
        if not request.password:
            raise ConfigError(
                f"role {request.role} does not exist and no password was given for it",
                "set CHANGELAKE_DEBEZIUM_PASSWORD (Connect reads the same variable)",
            )
        for statement in platform.create_role(request.role, request.password):
            conn.execute(statement)
        progress(f"  created role {request.role} (LOGIN, {platform.replication}; {platform.name})")
    elif _one(conn, "SELECT rolsuper FROM pg_roles WHERE rolname = %s", request.role):
        raise ConfigError(
            f"--role {request.role}: is a superuser; the connector's role must not be",
            "name another role (default debezium): init creates it with no more than it needs",
        )
    else:
        for statement in platform.ensure_role(request.role):
            conn.execute(statement)
        progress(
            f"  role {request.role} exists: LOGIN and {platform.replication} ensured, password "
            "left as it is"
        )
    own = (settings.schemas_dir / "changelake.sql").read_text()
    conn.execute(own)
    progress(f"  {HEARTBEAT} and {SIGNAL} present (schemas/changelake.sql)")
    database = sql.Identifier(str(conn.info.dbname))
    run(sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(database, role), "granted CONNECT")
    schemas = sorted({t.split(".")[0] for t in request.tables} | {"changelake"})
    for schema in schemas:
        conn.execute(sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(sql.Identifier(schema), role))
    progress(f"  granted USAGE on schema {', '.join(schemas)}")
    for table in request.tables:
        conn.execute(sql.SQL("GRANT SELECT ON {} TO {}").format(_table(table), role))
    progress(f"  granted SELECT on {', '.join(request.tables)}")
    for table, rights in _WRITE_GRANTS.items():
        conn.execute(sql.SQL("GRANT " + rights + " ON {} TO {}").format(_table(table), role))
    progress(f"  granted writes on {HEARTBEAT} and {SIGNAL} only")
    for table in [*request.keys, *events]:
        full = "SELECT relreplident = 'f' FROM pg_class WHERE oid = to_regclass(%s)"
        if _one(conn, full, _quoted(table)):
            continue  # ALTER TABLE would lock the table until the commit, for nothing
        # Without a replica identity, Postgres refuses the table's updates and deletes once it
        # is published; FULL has them carry the whole old row (the key columns given are there).
        run(
            sql.SQL("ALTER TABLE {} REPLICA IDENTITY FULL").format(_table(table)),
            f"{table}: REPLICA IDENTITY FULL (no primary key: its updates and deletes carry "
            "the whole old row)",
        )
    for table in events:
        progress(
            f"  {table}: no primary key and no --key: captured as an append-only event table "
            "(every change a row; its topic kept by retention, not compacted)"
        )
    _publish(conn, request, [*request.tables, HEARTBEAT, SIGNAL], progress)
    return events


def _check_tables(conn: psycopg.Connection[Any], request: Request) -> list[str]:
    """Refuses a missing table; returns the key-less tables not keyed by --key."""
    problems, events = [], []
    for table in request.tables:
        if _one(conn, "SELECT to_regclass(%s)", _quoted(table)) is None:
            problems.append(f"--tables: {table}: no such table")
            continue
        has_pk = _one(
            conn,
            "SELECT 1 FROM pg_index WHERE indrelid = to_regclass(%s) AND indisprimary",
            _quoted(table),
        )
        if has_pk is None and table not in request.keys:
            events.append(table)
    if problems:
        raise ConfigError("\n".join(problems), "nothing was changed")
    return events


def _publish(
    conn: psycopg.Connection[Any], request: Request, tables: list[str], progress: Progress
) -> None:
    name = sql.Identifier(request.publication)
    # A partitioned table's changes reach the connector as the table's only when the publication
    # publishes them through their root; otherwise each partition's come as that partition's.
    partitioned = [
        t
        for t in tables
        if _one(conn, "SELECT relkind FROM pg_class WHERE oid = to_regclass(%s)", _quoted(t)) == "p"
    ]
    via_root = sql.SQL(" WITH (publish_via_partition_root = true)" if partitioned else "")
    rooted = f"partitioned, published through their root: {', '.join(partitioned)}"
    if _one(conn, "SELECT 1 FROM pg_publication WHERE pubname = %s", request.publication) is None:
        listing = sql.SQL(", ").join(_table(t) for t in tables)
        conn.execute(
            sql.SQL("CREATE PUBLICATION {} FOR TABLE {}{}").format(name, listing, via_root)
        )
        said = f" ({rooted})" if partitioned else ""
        progress(f"  created publication {request.publication} of {', '.join(tables)}{said}")
        return
    if partitioned and not _one(
        conn, "SELECT pubviaroot FROM pg_publication WHERE pubname = %s", request.publication
    ):
        conn.execute(
            sql.SQL("ALTER PUBLICATION {} SET (publish_via_partition_root = true)").format(name)
        )
        progress(f"  publication {request.publication} now set so: {rooted}")
    published = {row[0] for row in conn.execute(PUBLISHED, {"publication": request.publication})}
    missing = [t for t in tables if t not in published]
    for table in missing:
        conn.execute(sql.SQL("ALTER PUBLICATION {} ADD TABLE {}").format(name, _table(table)))
    said = f"added {', '.join(missing)}" if missing else "has every table already"
    progress(f"  publication {request.publication} exists: {said}")


def connector_file(
    settings: Settings,
    request: Request,
    database: str,
    server: tuple[str, str],
    events: Sequence[str] = (),
    generated: Mapping[str, Sequence[str]] | None = None,
) -> dict[str, Any]:
    """The shipped connector file, made this database's (on `server`, host and port);
    `generated`: each table's generated columns, which it leaves out."""
    doc = jsonfile.read(settings.root / "connectors" / TEMPLATE)
    config: dict[str, str] = doc["config"]
    prefix = request.slot
    config.update(
        {
            "database.dbname": database,
            "database.user": request.role,
            "topic.prefix": prefix,
            "slot.name": request.slot,
            "publication.name": request.publication,
            "table.include.list": ",".join([*request.tables, HEARTBEAT, SIGNAL]),
            "topic.creation.meta.include": rf"{prefix}\.transaction|__debezium-heartbeat\.{prefix}",
        }
    )
    host, port = server
    if (host, port) != (settings.postgres_host, str(settings.postgres_port)):
        # Another server than the one the stack hands Connect: name it in the file.
        config["database.hostname"], config["database.port"] = host, port
    if events:  # their records have no key, which a compacted topic refuses
        groups = [g for g in config.get("topic.creation.groups", "").split(",") if g]
        config["topic.creation.groups"] = ",".join([*groups, topic_groups.EVENTS_GROUP])
        config.update(topic_groups.events_group(prefix, list(events)))
    if generated:
        config["column.exclude.list"] = ",".join(
            exclusion(table, column) for table, columns in generated.items() for column in columns
        )
    if request.keys:
        config["message.key.columns"] = ";".join(
            f"{table}:{','.join(columns)}" for table, columns in request.keys.items()
        )
    return {"name": request.name, "config": config}


def _table(name: str) -> sql.Composable:
    schema, table = name.split(".")
    return sql.Identifier(schema, table)


def _quoted(name: str) -> str:
    schema, table = name.split(".")
    return '"' + schema.replace('"', '""') + '"."' + table.replace('"', '""') + '"'


def _one(conn: psycopg.Connection[Any], query: str, *params: object) -> object:
    row = conn.execute(query, params or None).fetchone()
    return None if row is None else row[0]
