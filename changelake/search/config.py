"""What is indexed: `schemas/search.json`, validated, as one `IndexSpec` per table.

    {"indexes": {"products": {"fields": {"name": "text", "price": "numeric", ...}}}}

Each field is a column of the table and a kind (text, keyword, numeric, date, boolean). The file
is checked on its own when it is read (shape, kinds); the columns are checked against the table's
schema before an index is built. Every error names the file and the field.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import types as T

from changelake import jsonfile
from changelake.changelog.decode import LSN, SOURCE_TS
from changelake.exceptions import ConfigError
from changelake.settings import Settings

KINDS = ("text", "keyword", "numeric", "date", "boolean")
KEYWORD_MAX_CHARS = 2048  # longer values stay in _source but are not indexed as one term
_INTEGRAL = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
_DATES = (T.DateType, T.TimestampType, T.TimestampNTZType)
_BAD_INDEX_CHARS = re.compile(r'[\\/*?"<>| ,#:]')


@dataclass(frozen=True)
class IndexSpec:
    """One table's index: its columns and their kinds, and the file that declared them."""

    table: str
    fields: tuple[tuple[str, str], ...]  # (column, kind), in the file's order
    source: str  # the config file, for messages

    def kind(self, column: str) -> str | None:
        return dict(self.fields).get(column)

    def of_kind(self, *kinds: str) -> list[str]:
        return [c for c, k in self.fields if k in kinds]

    def columns(self, key: tuple[str, ...]) -> list[str]:
        """What a document holds: the key, the declared fields, the LSN and source commit time."""
        return [*key, *(c for c, _ in self.fields if c not in key), LSN, SOURCE_TS]

    def check(self, schema: T.StructType) -> None:
        """Every declared column exists in the table and suits its kind."""
        types = {f.name: f.dataType for f in schema.fields}
        for column, kind in self.fields:
            where = f"{self.source}: indexes.{self.table}.fields.{column}"
            if column.startswith("_") or "." in column:
                raise ConfigError(
                    f"{where}: OpenSearch cannot take a field named {column} (a leading _ or a dot)"
                )
            if column not in types:
                raise ConfigError(
                    f"{where}: table {self.table} has no column {column}",
                    f"its columns: {', '.join(types)}",
                )
            problem = _unsuitable(kind, types[column])
            if problem:
                raise ConfigError(f"{where}: {problem}")

    def mapping(self, schema: T.StructType, key: tuple[str, ...]) -> dict[str, Any]:
        """The index mapping; strict, so a document with anything else is rejected, not guessed."""
        types = {f.name: f.dataType for f in schema.fields}
        props: dict[str, Any] = {k: {"type": "keyword"} for k in key}
        for column, kind in self.fields:
            props[column] = _field_mapping(kind, types[column])
        props[LSN] = {"type": "long"}
        props[SOURCE_TS] = {"type": "date"}
        return {
            "dynamic": "strict",
            # What the index was built for: a rebuild is due when this no longer matches.
            "_meta": {"changelake": {"table": self.table, "properties": props}},
            "properties": props,
        }


def _element(data_type: T.DataType) -> T.DataType:
    return data_type.elementType if isinstance(data_type, T.ArrayType) else data_type


def _unsuitable(kind: str, data_type: T.DataType) -> str | None:
    inner = _element(data_type)
    shown = data_type.simpleString()
    if isinstance(inner, (T.BinaryType, T.StructType, T.MapType, T.ArrayType)):
        return f"a {shown} column cannot be indexed"
    if kind == "numeric" and not isinstance(
        inner, (*_INTEGRAL, T.DecimalType, T.FloatType, T.DoubleType, T.StringType)
    ):
        return f"kind numeric needs a number column, not {shown}"
    if kind == "date" and not isinstance(inner, _DATES):
        return f"kind date needs a date or timestamp column, not {shown}"
    if kind == "boolean" and not isinstance(inner, T.BooleanType):
        return f"kind boolean needs a boolean column, not {shown}"
    return None


def _field_mapping(kind: str, data_type: T.DataType) -> dict[str, Any]:
    inner = _element(data_type)
    if kind == "numeric":
        integral = isinstance(inner, _INTEGRAL) or (
            isinstance(inner, T.DecimalType) and inner.scale == 0 and inner.precision <= 18
        )
        # Decimals are searched as doubles; _source keeps the exact digits Delta holds.
        return {"type": "long" if integral else "double"}
    if kind == "keyword":
        return {"type": "keyword", "ignore_above": KEYWORD_MAX_CHARS}
    if kind == "date":
        return {"type": "date"}
    return {"type": kind}  # text, boolean


def config_path(settings: Settings) -> Path:
    return settings.search_config_override or settings.config_dir / "search.json"


def load_specs(path: Path, required: bool = False) -> dict[str, IndexSpec]:
    """The file's indexes by table name. Shape and kinds only; columns are checked later. A
    project without the file indexes nothing; a file `required` (named by
    CHANGELAKE_SEARCH_CONFIG) must be there."""
    if not path.exists() and not required:
        return {}
    doc = jsonfile.read(path)
    if not isinstance(doc, dict) or set(doc) - {"indexes"}:
        extra = sorted(set(doc) - {"indexes"}) if isinstance(doc, dict) else []
        field = f"{extra[0]}: unknown field (known: indexes)" if extra else "must be an object"
        raise ConfigError(
            f"{path}: {field}",
            'expected {"indexes": {"<table>": {"fields": {"<column>": "<kind>"}}}}',
        )
    indexes = doc.get("indexes", {})
    if not isinstance(indexes, dict):
        raise ConfigError(f"{path}: indexes: must be an object of table name → index")
    return {table: _spec(path, table, body) for table, body in indexes.items()}


def _spec(path: Path, table: str, body: Any) -> IndexSpec:
    where = f"{path}: indexes.{table}"
    if not isinstance(body, dict) or set(body) != {"fields"}:
        extra = sorted(set(body) - {"fields"}) if isinstance(body, dict) else []
        detail = (
            f".{extra[0]}: unknown field (known: fields)"
            if extra
            else (': must be {"fields": {"<column>": "<kind>", ...}}')
        )
        raise ConfigError(f"{where}{detail}")
    fields = body["fields"]
    if not isinstance(fields, dict) or not fields:
        raise ConfigError(f"{where}.fields: must name at least one column")
    for column, kind in fields.items():
        if kind not in KINDS:
            raise ConfigError(
                f"{where}.fields.{column}: unknown kind {json.dumps(kind)}",
                f"one of: {', '.join(KINDS)}",
            )
    return IndexSpec(table, tuple(fields.items()), str(path))


def alias_for(topic: str) -> str:
    """The index alias a table's documents live behind: its topic, as OpenSearch allows it."""
    name = topic.lower()
    if _BAD_INDEX_CHARS.search(name) or name.startswith(("_", "-", "+")) or len(name) > 200:
        raise ConfigError(
            f"topic {topic} cannot name an OpenSearch index",
            "choose a topic.prefix of letters, digits, '.', '-' and '_'",
        )
    return name
