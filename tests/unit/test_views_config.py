"""views.json: each mistake refused with the file and the field, before anything runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipelines import tables
from pipelines.exceptions import ConfigError
from pipelines.settings import load_settings
from pipelines.views.config import check_against, load_views

TABLES = {"customers": True, "audit": False}  # name → keyed (audit: an event table)


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


def test_the_shops_history_view_belongs_to_its_customers() -> None:
    refs = {r.name: r.history for r in tables.captured(load_settings())}
    assert refs == {
        "customers": "customers_history",
        "products": None,
        "orders": None,
        "order_lines": None,
    }
