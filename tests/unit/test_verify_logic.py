"""verify's pure parts: key ranges, the SQL that cuts them, comparable values, row differences."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

from psycopg import sql

from changelake.verify.canonical import as_json, canonical, document_value
from changelake.verify.diff import Differences
from changelake.verify.ranges import (
    KeyColumn,
    KeyRange,
    boundaries_query,
    ranges,
    source_filter,
)
from changelake.verify.sides import doc_id

KEY = [KeyColumn("shop", False), KeyColumn("sku", True)]


def test_ranges_cover_everything_once() -> None:
    assert ranges([(1,), (5,), (9,)]) == [
        KeyRange(None, (5,)),
        KeyRange((5,), (9,)),
        KeyRange((9,), None),
    ]
    assert ranges([()]) == [KeyRange(None, None)]  # an empty table: one unbounded range


def test_text_keys_are_ordered_bytewise_in_postgres() -> None:
    query = boundaries_query(sql.Identifier("public", "t"), KEY, 3).as_string(None)
    assert 'ORDER BY "shop", ("sku"::text COLLATE "C")' in query
    assert "(rn - 1) % 3 = 0" in query
    where, params = source_filter(KEY, KeyRange((1, "a"), (2, "b")))
    assert where.as_string(None) == (
        '("shop", ("sku"::text COLLATE "C")) >= (%s, %s)'
        ' AND ("shop", ("sku"::text COLLATE "C")) < (%s, %s)'
    )
    assert params == [1, "a", 2, "b"]
    assert source_filter(KEY, KeyRange(None, None))[0].as_string(None) == "TRUE"


def test_values_compare_by_meaning_not_by_spelling() -> None:
    assert canonical(Decimal("1.10")) == canonical(Decimal("1.1"))
    assert repr(canonical(Decimal("100.00"))) == repr(canonical(Decimal("1E+2")))  # hashed alike
    assert canonical(float("nan")) == canonical(float("nan"))
    assert canonical(-0.0) != canonical(0.0)
    aware = dt.datetime(2026, 1, 1, 1, tzinfo=dt.timezone(dt.timedelta(hours=1)))
    naive_utc = dt.datetime(2026, 1, 1, tzinfo=dt.UTC).replace(tzinfo=None)
    assert canonical(aware) == canonical(naive_utc)  # the same instant, as UTC wall time
    assert as_json('{"b": 1, "a": [1]}') == as_json('{"a":[1],"b":1}')
    assert document_value("2026-01-01T00:00:00.000000Z") == document_value(
        dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    )
    assert document_value(Decimal("19.90")) == document_value(Decimal("19.9"))


def test_document_ids_match_the_index() -> None:
    assert doc_id([7]) == "7"
    assert doc_id([3, "S7"]) == '["3","S7"]'


def test_differences_count_and_sample_each_kind() -> None:
    d = Differences("delta")
    source = {(1,): {"id": 1, "name": "a"}, (2,): {"id": 2, "name": "b"}, (3,): {"id": 3}}
    derived = {(1,): {"id": 1, "name": "a"}, (2,): {"id": 2, "name": "B"}, (4,): {"id": 4}}
    d.add(source, derived)
    assert (d.rows, d.missing, d.extra, d.differing) == (3, 1, 1, 1)
    assert not d.equal
    assert "missing 3" in d.samples and "extra 4" in d.samples
    assert any(s.startswith("differing 2: name: source 'b' derived 'B'") for s in d.samples)


def test_samples_are_bounded() -> None:
    d = Differences("delta")
    d.add({(i,): {"id": i} for i in range(100)}, {})
    assert d.missing == 100 and len(d.samples) == 10


def test_repair_keys_run_in_source_order_and_fit_the_signal() -> None:
    from changelake.capture.resend import SIGNAL_DATA_MAX, Request, condition, signal_data, spans
    from changelake.tables import TableRef

    ids = [KeyColumn("id", False)]
    assert spans(ids, [(9,), (1,), (5,), (1,)], 2) == [((1,), (5,)), ((9,), (9,))]
    # text keys byte-wise, as COLLATE "C" orders them: 'Z' before 'a'
    assert spans(KEY, [(1, "a"), (1, "Z")], 1) == [((1, "Z"), (1, "a"))]
    where = condition(ids, [((1,), (5,)), ((9,), (9,))]).as_string(None)
    assert where == '((("id") >= (1) AND ("id") <= (5)) OR ("id") = (9))'
    where = condition(KEY, [((1, "a"), (2, "b"))]).as_string(None)
    assert where == (
        """((("shop", ("sku"::text COLLATE "C")) >= (1, 'a')"""
        """ AND ("shop", ("sku"::text COLLATE "C")) <= (2, 'b')))"""
    )
    ref = TableRef("public", "orders", "shop.public.orders", "shop", "shop")
    many = Request(ref, ids, [(i * 7,) for i in range(5000)])  # too many runs for one signal
    data = signal_data(None, [many])  # type: ignore[arg-type]
    assert len(data) <= SIGNAL_DATA_MAX
    doc = json.loads(data)
    assert doc["data-collections"] == ["public.orders"]
    (only,) = doc["additional-conditions"]
    assert only["data-collection"] == "public.orders"
    assert only["filter"].startswith('((("id") >= (0) AND ("id") <= (')


def test_repair_resends_missing_and_differing_keys_not_extra_ones() -> None:
    d = Differences("delta")
    d.add(
        {(1,): {"v": 1}, (2,): {"v": 2}, (3,): {"v": 3}},
        {(2,): {"v": 2}, (3,): {"v": 0}, (4,): {"v": 4}},
    )
    assert sorted(d.resend) == [(1,), (3,)]
    assert (d.missing, d.extra, d.differing) == (1, 1, 1)
