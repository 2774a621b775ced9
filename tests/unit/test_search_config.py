"""schemas/search.json: shape and kinds checked on reading, columns against the table; every
error names the file and the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import types as T

from changelake.exceptions import ConfigError
from changelake.search.config import alias_for, load_specs

SCHEMA = T.StructType(
    [
        T.StructField("sku", T.StringType()),
        T.StructField("name", T.StringType()),
        T.StructField("tags", T.ArrayType(T.StringType())),
        T.StructField("price", T.DecimalType(10, 2)),
        T.StructField("qty", T.IntegerType()),
        T.StructField("in_stock", T.BooleanType()),
        T.StructField("updated_at", T.TimestampType()),
        T.StructField("blob", T.BinaryType()),
    ]
)


def write(tmp_path: Path, doc: object) -> Path:
    path = tmp_path / "search.json"
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return path


def fields(**kinds: str) -> dict[str, object]:
    return {"indexes": {"products": {"fields": kinds}}}


def test_the_shipped_file_is_valid() -> None:
    specs = load_specs(Path(__file__).parents[2] / "schemas" / "search.json")
    assert set(specs) == {"products", "customers"}
    assert specs["products"].of_kind("text") == ["name", "description"]


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ('{"indexes": {', "search.json: line 1 column 14: not JSON"),
        ([], "search.json: must be an object"),
        ({"index": {}}, "search.json: index: unknown field (known: indexes)"),
        ({"indexes": []}, "search.json: indexes: must be an object"),
        ({"indexes": {"products": {"field": {}}}}, "indexes.products.field: unknown field"),
        ({"indexes": {"products": {"fields": {}}}}, "indexes.products.fields: must name at least"),
        (fields(price="number"), 'indexes.products.fields.price: unknown kind "number"'),
    ],
)
def test_a_bad_file_names_the_file_and_field(tmp_path: Path, doc: object, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_specs(write(tmp_path, doc))
    assert message in str(caught.value)
    assert str(tmp_path) in str(caught.value)


@pytest.mark.parametrize(
    ("kinds", "message"),
    [
        ({"colour": "keyword"}, "fields.colour: table products has no column colour"),
        ({"name": "numeric"}, None),  # text may hold an unconstrained numeric: allowed
        ({"in_stock": "numeric"}, "fields.in_stock: kind numeric needs a number column"),
        ({"price": "date"}, "fields.price: kind date needs a date or timestamp column"),
        ({"qty": "boolean"}, "fields.qty: kind boolean needs a boolean column, not int"),
        ({"blob": "keyword"}, "fields.blob: a binary column cannot be indexed"),
        ({"_id": "keyword"}, "fields._id: OpenSearch cannot take a field named _id"),
    ],
)
def test_columns_are_checked_against_the_table(
    tmp_path: Path, kinds: dict[str, str], message: str | None
) -> None:
    spec = load_specs(write(tmp_path, fields(**kinds)))["products"]
    if message is None:
        spec.check(SCHEMA)
        return
    with pytest.raises(ConfigError) as caught:
        spec.check(SCHEMA)
    assert f"{tmp_path / 'search.json'}: indexes.products.{message}" in str(caught.value)


def test_the_mapping_is_strict_and_typed_by_column(tmp_path: Path) -> None:
    spec = load_specs(
        write(
            tmp_path,
            fields(
                name="text",
                tags="keyword",
                price="numeric",
                qty="numeric",
                in_stock="boolean",
                updated_at="date",
            ),
        )
    )["products"]
    mapping = spec.mapping(SCHEMA, ("sku",))
    props = mapping["properties"]
    assert mapping["dynamic"] == "strict"
    assert props["sku"] == {"type": "keyword"}
    assert props["name"] == {"type": "text"}
    assert props["tags"]["type"] == "keyword"
    assert props["price"] == {"type": "double"}  # _source keeps the exact digits
    assert props["qty"] == {"type": "long"}
    assert props["in_stock"] == {"type": "boolean"}
    assert props["updated_at"] == {"type": "date"}
    assert props["_cdc_lsn"] == {"type": "long"}
    assert mapping["_meta"]["changelake"]["properties"] == props  # what a rebuild compares


def test_aliases_are_topic_names_opensearch_accepts() -> None:
    assert alias_for("Shop.public.Products") == "shop.public.products"
    with pytest.raises(ConfigError, match="cannot name an OpenSearch index"):
        alias_for("_shop.public.products")


@pytest.mark.parametrize(
    "command", [["search", "lamp"], ["run", "--once"], ["reindex", "--tables", "x"]]
)
def test_commands_refuse_a_bad_file_before_doing_anything(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    command: list[str],
) -> None:
    from changelake.cli import main

    path = write(tmp_path, fields(price="money"))
    monkeypatch.setenv("CHANGELAKE_SEARCH_CONFIG", str(path))
    assert main(command) == 1
    err = capsys.readouterr().err
    assert f'{path}: indexes.products.fields.price: unknown kind "money"' in err
    assert "one of: text, keyword, numeric, date, boolean" in err


def test_an_index_for_a_table_nobody_captures_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from changelake.cli import main

    doc = {"indexes": {"invoices": {"fields": {"number": "keyword"}}}}
    monkeypatch.setenv("CHANGELAKE_SEARCH_CONFIG", str(write(tmp_path, doc)))
    assert main(["search", "x"]) == 1
    assert "indexes.invoices: no captured table invoices" in capsys.readouterr().err
