"""Which tables the pipeline derives: read from the connector files, one place for both.

A connector's `table.include.list` names the captured tables and its `topic.prefix` their topics
(`<prefix>.<schema>.<table>`). changelake's own schema (the heartbeat) is not derived.
`schemas/lake.json` holds per-table options (soft deletes, deletion vectors);
`schemas/search.json` what is indexed.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from changelake import jsonfile
from changelake.capture import connectors
from changelake.capture.source import SOURCE_KEYS, Source, source_of
from changelake.capture.source_checks import exclude_patterns, is_excluded
from changelake.capture.topic_groups import is_event_topic
from changelake.changelog.decode import DEFAULT_PLACEHOLDER
from changelake.changelog.registry import DEFAULT_TOPIC as DEFAULT_SCHEMAS_TOPIC
from changelake.changelog.registry import TOPIC_SETTING
from changelake.exceptions import ConfigError
from changelake.search.config import IndexSpec, config_path, load_specs
from changelake.settings import Settings
from changelake.views.config import check_against, project_views

OWN_SCHEMA = "changelake"


@dataclass(frozen=True)
class TableRef:
    schema: str
    # The derived table's name: its view in `query`, its key in lake.json, search.json and
    # `--tables`. The source table's name, unless two captured tables share that: then each is
    # `<topic prefix>_<table>` (see `_qualify`).
    name: str
    topic: str
    connector: str
    slot: str
    placeholder: str = DEFAULT_PLACEHOLDER
    soft_delete: bool = False
    search: IndexSpec | None = None  # what of it is indexed, if anything
    # The connector's database.* settings as written: where its source is, and who reads it
    # (placeholders are resolved when it is reached: source_of).
    source: tuple[tuple[str, str], ...] = ()
    signal_table: str | None = None  # the connector's signal.data.collection
    # Where the connector's LeanJsonConverter publishes schemas (unused with JsonConverter).
    schemas_topic: str = DEFAULT_SCHEMAS_TOPIC
    # Its topic is not compacted (capture/topic_groups.py): an append-only event table, every
    # change a row with its LSN, op and offset; no key, deletion vectors or search index.
    events: bool = False
    # Every change of it is stored beside it (sinks/history.py): a view of views.json reads it.
    keeps_history: bool = False
    # The connector's column.exclude.list: regexes of `schema.table.column` it does not capture
    # (a generated column, which Postgres before 18 does not replicate, `connectors init` adds).
    excluded: tuple[str, ...] = ()
    table: str = ""  # the source table's name; `name` when not given

    def __post_init__(self) -> None:
        if not self.table:
            object.__setattr__(self, "table", self.name)

    @property
    def prefix(self) -> str:
        """The connector's topic prefix (its topics are `<prefix>.<schema>.<table>`)."""
        return self.topic.removesuffix(f".{self.schema}.{self.table}")

    def captures(self, column: str) -> bool:
        """Whether the connector captures `column` of this table (Debezium matches its
        column.exclude.list whole and case-blind against `schema.table.column`)."""
        return not is_excluded(self.excluded, f"{self.schema}.{self.table}", column)

    def path(self, root: str) -> str:
        """Its base table: under the topic prefix, which no two connectors share, so tables of
        the same name from two databases never meet."""
        return f"{root.rstrip('/')}/{self.prefix}/{self.schema}/{self.table}"


def lake_config_path(settings: Settings) -> Path:
    return settings.lake_config_override or settings.config_dir / "lake.json"


# Each a list of table names. `history`: tables that keep a stored history though no view reads
# them, so a read at one transaction (`query --consistent`) can include them.
LAKE_OPTIONS = ("soft_delete", "history")
# Options that were, and what became of them: a project's old lake.json is told, not refused blind.
RETIRED_OPTIONS = {
    "deletion_vectors": "every base table keeps deletion vectors now (merge-on-write,"
    " docs/readers.md says which readers read them): remove the field",
}


def _lake_options(path: Path, required: bool) -> dict[str, set[str]]:
    """lake.json: for each option, the tables that take it (none when the project has no file
    and none is `required`, named by CHANGELAKE_LAKE_CONFIG)."""
    missing = not path.exists() and not required
    doc = {} if missing else jsonfile.read(path)
    if not isinstance(doc, dict):
        raise ConfigError(f'{path}: must be an object like {{"soft_delete": ["orders"]}}')
    for option in sorted(set(doc) & set(RETIRED_OPTIONS)):
        raise ConfigError(f"{path}: {option}: no longer an option: {RETIRED_OPTIONS[option]}")
    unknown = sorted(set(doc) - set(LAKE_OPTIONS))
    if unknown:
        raise ConfigError(f"{path}: {unknown[0]}: unknown field (known: {', '.join(LAKE_OPTIONS)})")
    options = {}
    for option in LAKE_OPTIONS:
        names = doc.get(option, [])
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise ConfigError(f"{path}: {option}: must be a list of table names")
        options[option] = set(names)
    return options


def _from_connector(cf: connectors.ConnectorFile) -> list[TableRef]:
    prefix = cf.config.get("topic.prefix", "")
    placeholder = cf.config.get("unavailable.value.placeholder", DEFAULT_PLACEHOLDER)
    refs = []
    for entry in filter(
        None, (e.strip() for e in cf.config.get("table.include.list", "").split(","))
    ):
        schema, _, name = entry.rpartition(".")
        if not schema or schema == OWN_SCHEMA:
            continue
        refs.append(
            TableRef(
                schema=schema,
                name=name,
                topic=f"{prefix}.{schema}.{name}",
                connector=cf.name,
                slot=cf.config.get("slot.name", ""),
                placeholder=placeholder,
                source=tuple(sorted((k, v) for k, v in cf.config.items() if k in SOURCE_KEYS)),
                signal_table=cf.config.get("signal.data.collection"),
                schemas_topic=cf.config.get(TOPIC_SETTING, DEFAULT_SCHEMAS_TOPIC),
                events=is_event_topic(cf.config, f"{prefix}.{schema}.{name}"),
                excluded=exclude_patterns(cf.config),
            )
        )
    return refs


_NOT_IN_NAME = re.compile(r"[^A-Za-z0-9_]")


def _qualify(refs: list[TableRef]) -> list[TableRef]:
    """Tables of one name captured more than once (two databases' `orders`) are each named
    `<topic prefix>_<table>` (`inventory_orders`), or with the schema too when one connector
    captures that name from two schemas; a name captured once stays as it is."""

    def qualified(ref: TableRef, schema: bool) -> str:
        parts = [ref.prefix, ref.schema, ref.table] if schema else [ref.prefix, ref.table]
        return _NOT_IN_NAME.sub("_", "_".join(parts))

    counts = Counter(r.table.lower() for r in refs)
    prefixed = Counter(qualified(r, False).lower() for r in refs)
    out = []
    for ref in refs:
        if counts[ref.table.lower()] > 1:
            schema = prefixed[qualified(ref, False).lower()] > 1
            ref = replace(ref, name=qualified(ref, schema))
        out.append(ref)
    first: dict[str, TableRef] = {}
    for ref in out:  # e.g. prefixes a-b and a_b, or a table named like another's qualified name
        other = first.setdefault(ref.name.lower(), ref)
        if other is not ref:
            raise ConfigError(
                f"two captured tables would both be named {ref.name}: {other.topic} (connector "
                f"{other.connector}) and {ref.topic} (connector {ref.connector})",
                "give one connector another topic.prefix, or capture one of them only",
            )
    return out


def _with_views(settings: Settings, refs: list[TableRef], asked: set[str]) -> list[TableRef]:
    specs = project_views(settings)
    check_against(specs, {r.name: not r.events for r in refs})
    read = {t for s in specs for t in s.tables} | asked
    return [replace(r, keeps_history=r.name in read) for r in refs]


def source_of_table(settings: Settings, ref: TableRef) -> Source:
    """The source database of a captured table, reached as its connector's user."""
    return source_of(settings, dict(ref.source))


def slot_tables(refs: Iterable[TableRef]) -> dict[str, TableRef]:
    """Each replication slot the tables are read through (in order), and one table read
    through it: what its connector's settings are read from."""
    return {r.slot: r for r in sorted((r for r in refs if r.slot), key=lambda r: r.slot)}


def slot_sources(settings: Settings, refs: Iterable[TableRef]) -> dict[str, Source]:
    """Each replication slot the tables are read through, and its source database."""
    return {slot: source_of_table(settings, r) for slot, r in slot_tables(refs).items()}


def captured(
    settings: Settings, only: list[str] | None = None, files: list[Path] | None = None
) -> list[TableRef]:
    """Every derived table, or those named in `only` (an unknown name is an error)."""
    lake = _lake_options(lake_config_path(settings), settings.lake_config_override is not None)
    search = load_specs(config_path(settings), settings.search_config_override is not None)
    refs: list[TableRef] = []
    for path in files or connectors.default_files(settings):
        loaded, problems = connectors.load(path)
        if loaded is None:
            raise ConfigError("\n".join(str(p) for p in problems))
        refs += _from_connector(loaded)
    refs = [
        replace(
            r,
            soft_delete=r.name in lake["soft_delete"],
            search=search.get(r.name),
        )
        for r in _qualify(refs)
    ]
    refs = _with_views(settings, refs, lake["history"])
    known = {r.name for r in refs}
    for option, names in lake.items():
        unknown = sorted(names - known)
        if unknown:
            raise ConfigError(
                f"{lake_config_path(settings)}: {option}: no captured table {unknown[0]}"
            )
    unindexable = sorted(set(search) - known)
    if unindexable:
        raise ConfigError(
            f"{config_path(settings)}: indexes.{unindexable[0]}: no captured table "
            f"{unindexable[0]}",
            f"captured tables: {', '.join(sorted(known))} (from connectors/*.json)",
        )
    for ref in refs:
        if ref.events and (ref.soft_delete or ref.name in lake["history"]):
            option = "soft_delete" if ref.soft_delete else "history"
            raise ConfigError(
                f"{lake_config_path(settings)}: {option}: {ref.name} is an append-only event "
                "table: nothing in it is deleted or updated"
            )
        if ref.events and ref.search is not None:
            raise ConfigError(
                f"{config_path(settings)}: indexes.{ref.name}: {ref.topic} is an append-only "
                "event table (its topic is not compacted): it has no key to index documents by"
            )
    if not only:
        return refs
    missing = [n for n in only if n not in known]
    if missing:
        raise ConfigError(
            f"no captured table named {missing[0]}",
            f"captured tables: {', '.join(sorted(known))} (from connectors/*.json)",
        )
    return [r for r in refs if r.name in only]
