"""What a Postgres connector file asks of its database, checked there before anything is
registered: each one a `file: field: message` line. Run as the connector's own user, so "can it
read the table" is answered by the role that will read it.

Without these, Connect accepts the file (RUNNING) and the connector fails later: at its first
change of a key-less table whose topic is compacted (a compacted topic refuses a record without
a key, and capture of every table stops), or at start on a slot another connector holds.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from changelake.capture.connect_api import ConnectApi
from changelake.capture.source import Source, source_of
from changelake.capture.topic_groups import is_event_topic, topic_of
from changelake.exceptions import ConfigError
from changelake.settings import Settings

if TYPE_CHECKING:  # imported when used: `changelake query` reads this module, never connects
    import psycopg

POSTGRES_CONNECTOR = "io.debezium.connector.postgresql.PostgresConnector"
# Debezium's defaults for the settings a file may leave out.
DEFAULT_PUBLICATION, DEFAULT_SLOT, DEFAULT_PLUGIN = "dbz_publication", "debezium", "decoderbufs"
INCLUDE = "config.table.include.list"

# The table a heartbeat query writes: INSERT INTO t …, or UPDATE t SET ….
WRITTEN_TABLE = re.compile(
    r"\b(?:insert\s+into|update)\s+((?:\"[^\"]+\"|[\w$]+)(?:\.(?:\"[^\"]+\"|[\w$]+))?)", re.I
)

_TABLES = """
SELECT n.nspname || '.' || c.relname,
       has_schema_privilege(n.oid, 'USAGE') AND has_table_privilege(c.oid, 'SELECT'),
       has_schema_privilege(n.oid, 'USAGE') AND has_table_privilege(c.oid, 'INSERT')
           AND has_table_privilege(c.oid, 'UPDATE'),
       EXISTS (SELECT FROM pg_index i WHERE i.indrelid = c.oid AND i.indisprimary),
       c.relreplident = 'f',
       c.relkind = 'p'
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p')
  AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\\_%'
"""

PUBLISHED = """
SELECT schemaname || '.' || tablename FROM pg_publication_tables WHERE pubname = %(publication)s
UNION
SELECT n.nspname || '.' || c.relname
FROM pg_publication_rel r JOIN pg_publication p ON p.oid = r.prpubid
JOIN pg_class c ON c.oid = r.prrelid JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE p.pubname = %(publication)s
"""


# Stored generated columns (Postgres 12+): logical replication sends their values only from
# Postgres 18 on, and only when the publication asks; a snapshot reads them all the same.
GENERATED = """
SELECT n.nspname || '.' || c.relname, a.attname
FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE a.attgenerated = 's' AND NOT a.attisdropped AND a.attnum > 0
ORDER BY 1, a.attnum
"""


def generated_columns(conn: psycopg.Connection[Any]) -> dict[str, list[str]]:
    """Each table's stored generated columns whose changes logical replication leaves out
    (none on Postgres 18 and later, which can publish them)."""
    version = int(conn.execute("SHOW server_version_num").fetchone()[0])  # type: ignore[index]
    if version < 120000 or version >= 180000:
        return {}
    found: dict[str, list[str]] = {}
    for table, column in conn.execute(GENERATED):
        found.setdefault(str(table), []).append(str(column))
    return found


@dataclass(frozen=True)
class Table:
    name: str  # schema.table
    readable: bool
    writable: bool  # INSERT and UPDATE: what a heartbeat query's upsert needs
    has_pk: bool
    identity_full: bool
    partitioned: bool


@dataclass(frozen=True)
class Slot:
    database: str
    plugin: str
    active_pid: int | None


@dataclass(frozen=True)
class Found:
    """What the database says, read once."""

    tables: dict[str, Table]
    publication: set[str] | None  # its tables; None when there is no such publication
    slot: Slot | None
    via_root: bool = False  # it publishes a partitioned table's changes as the table's own
    generated: dict[str, list[str]] = dataclasses.field(
        default_factory=dict
    )  # see generated_columns


def problems(
    settings: Settings,
    name: str,
    config: Mapping[str, str],
    registered: Mapping[str, Mapping[str, str]],
) -> list[tuple[str, str]]:
    """(field, message) for everything the database refuses; `registered`: the configs of the
    connectors Connect already has, by name."""
    if config.get("connector.class") != POSTGRES_CONNECTOR:
        return []
    try:
        source = source_of(settings, config)
    except ConfigError as exc:
        field, _, message = exc.message.partition(": ")
        return [(field, f"{message} ({exc.hint})" if exc.hint else message)]
    import psycopg

    try:
        found = _read(source, config)
    except psycopg.OperationalError as exc:
        return [_unreachable(source, exc)]
    return [
        *_slot_problems(config, name, source, found.slot, registered),
        *_table_problems(config, source, found),
        *_side_table_problems(config, source, found.tables),
    ]


def _read(source: Source, config: Mapping[str, str]) -> Found:
    import psycopg

    publication = config.get("publication.name", DEFAULT_PUBLICATION)
    with psycopg.connect(source.dsn(), connect_timeout=10, autocommit=True) as conn:
        tables = {row[0]: Table(*row) for row in conn.execute(_TABLES)}
        published: set[str] | None = None
        pub = conn.execute(
            "SELECT pubviaroot FROM pg_publication WHERE pubname = %s", (publication,)
        ).fetchone()
        if pub is not None:
            # What it publishes, and the tables named in it: a partitioned table added to a
            # publication that publishes partitions as tables shows only among the latter.
            rows = conn.execute(PUBLISHED, {"publication": publication})
            published = {row[0] for row in rows}
        row = conn.execute(
            "SELECT coalesce(database, ''), coalesce(plugin, ''), active_pid"
            " FROM pg_replication_slots WHERE slot_name = %s",
            (config.get("slot.name", DEFAULT_SLOT),),
        ).fetchone()
        generated = generated_columns(conn)
    slot = Slot(*row) if row else None
    return Found(tables, published, slot, bool(pub and pub[0]), generated)


def _unreachable(source: Source, exc: psycopg.OperationalError) -> tuple[str, str]:
    text = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
    said = f"cannot connect to {source.where()} as {source.user}: {text}"
    if "password" in text or "authentication" in text:
        return "config.database.password", said
    if "database" in text and "does not exist" in text:
        return "config.database.dbname", said
    if "role" in text and "does not exist" in text:
        return "config.database.user", said
    return "config.database.hostname", said


def listed(config: Mapping[str, str], tables: Iterable[str]) -> dict[str, list[str]]:
    """Each table.include.list entry (a regular expression, matched whole and case-blind, as
    Debezium does) and the tables it captures."""
    entries = [e.strip() for e in config.get("table.include.list", "").split(",") if e.strip()]
    names = sorted(tables)
    return {e: [t for t in names if re.fullmatch(e, t, re.IGNORECASE)] for e in entries}


def key_columns(config: Mapping[str, str], table: str) -> list[str]:
    """The columns message.key.columns names as `table`'s key ("<table regex>:<col>,…;…")."""
    for part in config.get("message.key.columns", "").split(";"):
        pattern, _, columns = part.strip().rpartition(":")
        if pattern and re.fullmatch(pattern, table, re.IGNORECASE):
            return [c.strip() for c in columns.split(",") if c.strip()]
    return []


def _table_problems(
    config: Mapping[str, str], source: Source, found: Found
) -> Iterable[tuple[str, str]]:
    publication = config.get("publication.name", DEFAULT_PUBLICATION)
    needs_publication = config.get("publication.autocreate.mode", "all_tables") == "disabled"
    if needs_publication and found.publication is None:
        yield (
            "config.publication.name",
            f"no publication {publication} in {source.where()}, and "
            "publication.autocreate.mode=disabled: create it (`changelake connectors init`)",
        )
    for entry, tables in listed(config, found.tables).items():
        if not tables:
            yield INCLUDE, f"{entry}: no such table in {source.where()}"
        for name in tables:
            yield from _table_problem(name, found, config, source)


def exclude_patterns(config: Mapping[str, str]) -> tuple[str, ...]:
    """The connector's column.exclude.list: regexes of `schema.table.column`."""
    return tuple(p.strip() for p in config.get("column.exclude.list", "").split(",") if p.strip())


def is_excluded(patterns: tuple[str, ...], table: str, column: str) -> bool:
    """Whether `patterns` leave `table`'s `column` out (Debezium matches each whole, case-blind)."""
    return any(re.fullmatch(p, f"{table}.{column}", re.IGNORECASE) for p in patterns)


def excluded(config: Mapping[str, str], table: str, column: str) -> bool:
    """Whether the connector's column.exclude.list leaves `table`'s `column` out."""
    return is_excluded(exclude_patterns(config), table, column)


def exclusion(table: str, column: str) -> str:
    """The column.exclude.list entry for one column (a regex matched whole)."""
    return re.escape(f"{table}.{column}")


def generated_problems(
    name: str, columns: list[str], config: Mapping[str, str]
) -> Iterable[tuple[str, str]]:
    """A generated column captured: its snapshot rows would hold values and every streamed
    change NULL, a table half wrong. Left out, the lake has no such column at all."""
    for column in columns:
        if not excluded(config, name, column):
            yield (
                "config.column.exclude.list",
                f"{name}: column {column} is generated (GENERATED ALWAYS … STORED), whose values "
                "Postgres before 18 does not replicate: the snapshot would hold them and every "
                "changed row NULL; leave it out "
                f'("column.exclude.list": "{exclusion(name, column)}"; `connectors init` does) '
                "and compute it in a query",
            )


def publication_problems(
    name: str, table: Table, found: Found, publication: str
) -> Iterable[tuple[str, str]]:
    """What keeps `table`'s changes out of the publication, with the statements that fix it."""
    assert found.publication is not None
    fixes = (
        [] if name in found.publication else [f"ALTER PUBLICATION {publication} ADD TABLE {name}"]
    )
    if table.partitioned and not found.via_root:
        # Without it Postgres sends each partition's changes as that partition's, which the
        # connector does not capture: none would reach the table's topic.
        fixes.append(f"ALTER PUBLICATION {publication} SET (publish_via_partition_root = true)")
        yield (
            INCLUDE,
            f"{name}: a partitioned table, but publication {publication} publishes each "
            f"partition's changes as the partition's, so none would be captured "
            f"({'; '.join(fixes)})",
        )
    elif fixes:
        yield (
            INCLUDE,
            f"{name}: not in publication {publication}, so none of its changes would be "
            f"captured ({fixes[0]})",
        )


def _table_problem(
    name: str, found: Found, config: Mapping[str, str], source: Source
) -> Iterable[tuple[str, str]]:
    table, publication = found.tables[name], config.get("publication.name", DEFAULT_PUBLICATION)
    # In `filtered` mode Debezium adds the listed tables to the publication itself.
    filtered = config.get("publication.autocreate.mode") == "filtered"
    if found.publication is not None and not filtered:
        yield from publication_problems(name, table, found, publication)
    elif filtered and table.partitioned:
        yield (
            "config.publication.autocreate.mode",
            f"{name}: a partitioned table, whose changes reach only a publication made with "
            "publish_via_partition_root = true, which Debezium's filtered mode does not make: "
            "set publication.autocreate.mode to disabled and create the publication with "
            "`changelake connectors init`",
        )
    yield from generated_problems(name, found.generated.get(name, []), config)
    if not table.readable:
        schema = name.split(".")[0]
        yield (
            INCLUDE,
            f"{name}: {source.user} cannot read it, so its snapshot would fail (GRANT USAGE ON "
            f"SCHEMA {schema} TO {source.user}; GRANT SELECT ON {name} TO {source.user})",
        )
    if table.has_pk:
        return
    events = is_event_topic(config, topic_of(config, name))
    if not key_columns(config, name) and not events:
        yield (
            INCLUDE,
            f"{name}: has no primary key: its changes would reach Kafka without a key, which "
            "a compacted topic refuses, and the connector would fail for every table; add a "
            f'primary key, name key columns ("message.key.columns": "{name}:<col>,…"), or '
            "capture it as an append-only event table: a topic.creation group with "
            "cleanup.policy delete that includes its topic (`connectors init` writes one)",
        )
    elif not table.identity_full:
        how = "captured as events" if events else "keyed by message.key.columns"
        yield (
            "config.message.key.columns" if not events else INCLUDE,
            f"{name}: {how} without a primary key, its updates and deletes carry no old row "
            f"(and Postgres refuses them once it is published): ALTER TABLE {name} "
            "REPLICA IDENTITY FULL",
        )


def _slot_problems(
    config: Mapping[str, str],
    name: str,
    source: Source,
    slot: Slot | None,
    registered: Mapping[str, Mapping[str, str]],
) -> Iterable[tuple[str, str]]:
    wanted = config.get("slot.name", DEFAULT_SLOT)
    for other, theirs in sorted(registered.items()):
        if (
            other != name
            and theirs.get("slot.name", DEFAULT_SLOT) == wanted
            and same_server(theirs, config)
        ):
            yield "config.slot.name", f"slot {wanted} is the slot of connector {other}"
            return
    if slot is None:
        return
    plugin = config.get("plugin.name", DEFAULT_PLUGIN)
    if slot.database != source.dbname:
        yield "config.slot.name", f"slot {wanted} belongs to database {slot.database!r}"
    elif slot.plugin != plugin:
        yield "config.slot.name", f"slot {wanted} decodes with {slot.plugin}, not {plugin}"
    elif slot.active_pid is not None and name not in registered:
        yield (
            "config.slot.name",
            f"slot {wanted} is in use by another client (server pid {slot.active_pid})",
        )


def same_server(theirs: Mapping[str, str], ours: Mapping[str, str]) -> bool:
    """Whether two connector configs name the same server (as written: a slot's name is unique
    per server, and placeholders resolve alike for connectors of one Connect)."""
    keys = ("database.hostname", "database.port")
    return all(theirs.get(k, "") == ours.get(k, "") for k in keys)


def _side_table_problems(
    config: Mapping[str, str], source: Source, tables: Mapping[str, Table]
) -> Iterable[tuple[str, str]]:
    """The heartbeat query's table and the signal table: present, and writable by the role."""
    wanted: list[tuple[str, str]] = []
    if match := WRITTEN_TABLE.search(config.get("heartbeat.action.query", "")):
        wanted.append(("config.heartbeat.action.query", match.group(1).replace('"', "")))
    if signal := config.get("signal.data.collection", "").strip():
        wanted.append(("config.signal.data.collection", signal.replace('"', "")))
    for field, name in wanted:
        table = _lookup(tables, name)
        if table is None:
            yield field, f"{name}: no such table in {source.where()}"
        elif not (table.readable and table.writable):
            yield field, f"{name}: {source.user} cannot write it (GRANT SELECT, INSERT, UPDATE)"


def _lookup(tables: Mapping[str, Table], name: str) -> Table | None:
    qualified = name if "." in name else f"public.{name}"
    return tables.get(qualified) or next(
        (t for n, t in tables.items() if n.lower() == qualified.lower()), None
    )


def registered_configs(api: ConnectApi) -> dict[str, dict[str, str]]:
    """The registered connectors' configs by name. Right after Connect starts, `expand=info`
    answers `null` for a connector whose config it has not read back yet: that one is asked for
    on its own."""
    connectors: Mapping[str, Any] = api.get("/connectors?expand=info")
    return {
        name: dict(info["config"] if info else api.get(f"/connectors/{quote(name)}/config"))
        for name, info in ((n, item.get("info")) for n, item in connectors.items())
    }
