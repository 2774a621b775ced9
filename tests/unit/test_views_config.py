"""views.json: each mistake refused with the file and the field, before anything runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from changelake import tables
from changelake.exceptions import ConfigError
from changelake.settings import load_settings
from changelake.views.config import check_against, load_views

TABLES = {"customers": True, "orders": True, "audit": False}  # name → keyed (audit: events)


def join(**fields: object) -> dict[str, object]:
    return {"table": "orders", "on": {"customer_id": "customers.id"}} | fields


def total(**fields: object) -> dict[str, object]:
    """Orders per customer, with `fields` replaced."""
    spec = {"kind": "aggregate", "table": "customers", "columns": ["country"], "joins": [join()]}
    return spec | {"measures": {"orders": "count(*)"}} | fields


def enrich(**lookup: object) -> dict[str, object]:
    """An enrichment of orders by customers, with `lookup`'s fields replaced."""
    fields = {"table": "customers", "on": {"customer_id": "id"}, "columns": ["country"]}
    return {"kind": "enrichment", "table": "orders", "lookup": fields | lookup}


def refused(tmp_path: Path, doc: object, known: dict[str, bool] = TABLES) -> str:
    path = tmp_path / "views.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ConfigError) as error:
        check_against(load_views(path), known)
    return error.value.message.removeprefix(f"{path}: ")


@pytest.mark.parametrize(
    ("views", "message"),
    [
        ({"h": {"kind": "scd9", "table": "customers"}}, "views.h.kind: 'scd9' is not a view kind"),
        ({"h": {"kind": "history"}}, "views.h.table: the captured table it derives from"),
        ({"h": {"kind": "history", "table": "nope"}}, "views.h.table: no captured table nope"),
        ({"h": {"kind": "history", "table": "audit"}}, "views.h.table: audit is an append-only"),
        ({"customers": {"kind": "history", "table": "customers"}}, "views.customers: a captured"),
        ({"h-1": {"kind": "history", "table": "customers"}}, "views.h-1: a view's name is"),
        ({"_errors": {"kind": "history", "table": "customers"}}, "views._errors: names starting"),
        ({"Customers": {"kind": "history", "table": "customers"}}, "views.Customers: a captured"),
        ({"h": {"kind": "history", "table": "customers", "on": 1}}, "views.h.on: unknown field"),
        ({"e": {"kind": "enrichment", "table": "customers"}}, "views.e.lookup: must be an object"),
        ({"e": enrich(table="audit")}, "views.e.lookup.table: audit is an append-only"),
        ({"e": enrich(table="nope")}, "views.e.lookup.table: no captured table nope"),
        ({"e": enrich(on={"a": 1})}, "views.e.lookup.on: an object from"),
        ({"e": enrich(on=[])}, "views.e.lookup.on: an object from"),
        ({"e": enrich(columns=[])}, "views.e.lookup.columns: the lookup table's columns"),
        ({"e": enrich(columns={"x": 2})}, "views.e.lookup.columns: the lookup table's columns"),
        ({"e": enrich(at="now")}, "views.e.lookup.at: unknown field"),
        ({"a": total(joins=[])}, "views.a.joins: a list of joins"),
        ({"a": total(measures={})}, "views.a.measures: an object from the view's names"),
        ({"a": total(measures={"country": "count(*)"})}, "views.a.measures.country: a column"),
        ({"a": total(columns="country")}, "views.a.columns: customers's columns"),
        ({"a": total(joins=[{"table": "orders"}])}, "views.a.joins[0].on: an object from"),
        ({"a": total(joins=[join(on={"customer_id": "id"})])}, "views.a.joins[0].on: an object"),
        ({"a": total(joins=[join(on={"x": "lines.id"})])}, "views.a.joins[0].on: lines is not"),
        ({"a": total(joins=[join(table="customers")])}, "views.a.joins[0].table: customers is"),
        ({"a": total(joins=[join(optional="yes")])}, "views.a.joins[0].optional: true"),
        ({"a": total(joins=[join(table="audit")])}, "views.a.joins[0].table: audit is an append"),
        (
            {
                "a": {"kind": "history", "table": "customers"},
                "b": {"kind": "history", "table": "customers"},
            },
            "views.b.table: customers has a history already (a)",
        ),
    ],
)
def test_a_bad_view_is_refused_naming_file_and_field(
    tmp_path: Path, views: dict[str, object], message: str
) -> None:
    assert refused(tmp_path, {"views": views}).startswith(message)


def test_the_shops_views_keep_the_histories_they_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    refs = {r.name: r.keeps_history for r in tables.captured(load_settings())}
    # products: lake.json asks for its history (for reads at one transaction), no view reads it
    assert refs == {"customers": True, "products": True, "orders": True, "order_lines": True}
    (tmp_path / "lake.json").write_text("{}")
    monkeypatch.setenv("CHANGELAKE_LAKE_CONFIG", str(tmp_path / "lake.json"))
    refs = {r.name: r.keeps_history for r in tables.captured(load_settings())}
    assert refs == {"customers": True, "products": False, "orders": True, "order_lines": True}


def test_an_enrichment_reads_two_tables(tmp_path: Path) -> None:
    path = tmp_path / "views.json"
    columns = {"customer_country": "country"}
    path.write_text(json.dumps({"views": {"e": enrich(columns=columns), "f": enrich()}}))
    (renamed, kept) = load_views(path)
    check_against([renamed, kept], TABLES)
    assert renamed.tables == ("orders", "customers")
    assert renamed.lookup is not None and kept.lookup is not None
    assert renamed.lookup.columns == (("customer_country", "country"),)
    assert kept.lookup.columns == (("country", "country"),)
    assert renamed.lookup.on == (("customer_id", "id"),)
