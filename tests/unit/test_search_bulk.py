"""Bulk outcomes and request sizing, and the search request body: pure logic."""

from __future__ import annotations

import json

import pytest

from changelake.exceptions import ConfigError
from changelake.search import bulk
from changelake.search.bulk import Doc, action_lines, chunks, outcome
from changelake.search.config import IndexSpec
from changelake.search.find import build_query, parse_filters


@pytest.mark.parametrize(
    ("item", "expected"),
    [
        ({"status": 201, "result": "created"}, "written"),
        ({"status": 404, "result": "not_found"}, "written"),  # deleting what is not there
        ({"status": 409, "error": {"type": "version_conflict_engine_exception"}}, "stale"),
        ({"status": 429, "error": {"type": "es_rejected_execution_exception"}}, "retry"),
        ({"status": 503, "error": {"type": "unavailable_shards_exception"}}, "retry"),
        ({"status": 404, "error": {"type": "index_not_found_exception"}}, "retry"),
        ({"status": 403, "error": {"type": "cluster_block_exception"}}, "retry"),  # disk full
        ({"status": 400, "error": {"type": "illegal_argument_exception"}}, "rejected"),
        (
            {"status": 400, "error": {"type": "mapper_parsing_exception", "reason": "bad"}},
            "rejected",
        ),
    ],
)
def test_each_bulk_answer_is_classified(item: dict[str, object], expected: str) -> None:
    assert outcome(item)[0] == expected


def test_a_rejection_keeps_opensearch_reason_and_cause() -> None:
    kind, reason = outcome(
        {
            "status": 400,
            "error": {
                "type": "mapper_parsing_exception",
                "reason": "failed to parse field [code]",
                "caused_by": {"type": "number_format_exception", "reason": 'For input "abc"'},
            },
        }
    )
    assert kind == "rejected"
    assert reason is not None and "failed to parse field [code]" in reason
    assert "number_format_exception" in reason


def test_actions_carry_the_lsn_as_external_version() -> None:
    index_line, source = action_lines("a", Doc("k1", 42, False, '{"x":1}')).decode().splitlines()
    assert json.loads(index_line) == {
        "index": {"_index": "a", "_id": "k1", "version": 42, "version_type": "external"}
    }
    assert source == '{"x":1}'
    (delete_line,) = action_lines("a", Doc("k1", 43, True, None)).decode().splitlines()
    assert json.loads(delete_line)["delete"]["version"] == 43


def test_requests_are_cut_by_size_and_count(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bulk, "MAX_BYTES", 1000)
    monkeypatch.setattr(bulk, "MAX_DOCS", 3)
    docs = [Doc(str(i), i, False, '{"t":"' + "x" * 300 + '"}') for i in range(7)]
    sizes = [len(c) for c in chunks(docs, "a")]
    assert sizes == [2, 2, 2, 1]  # two 400-byte actions fit under 1000 bytes, three do not
    monkeypatch.setattr(bulk, "MAX_BYTES", 10**6)
    assert [len(c) for c in chunks(docs, "a")] == [3, 3, 1]


SPECS = [
    IndexSpec(
        "products",
        (
            ("name", "text"),
            ("tags", "keyword"),
            ("price", "numeric"),
            ("in_stock", "boolean"),
            ("updated_at", "date"),
        ),
        "search.json",
    ),
    IndexSpec("customers", (("name", "text"), ("country", "keyword")), "search.json"),
]


def test_the_query_matches_text_and_keyword_fields_and_filters_apart() -> None:
    filters = parse_filters(SPECS, ["country=DE", "price<=20", "in_stock=TRUE", "name=red lamp"])
    body = build_query("steel", SPECS, filters, 5, ("<em>", "</em>"))
    must = body["query"]["bool"]["must"][0]["multi_match"]
    assert must["query"] == "steel" and must["fields"] == ["country", "name", "tags"]
    assert body["query"]["bool"]["filter"] == [
        {"term": {"country": "DE"}},
        {"range": {"price": {"lte": "20"}}},
        {"term": {"in_stock": "true"}},
        {"match": {"name": {"query": "red lamp", "operator": "and"}}},
    ]
    assert body["highlight"]["highlight_query"] == body["query"]["bool"]["must"][0]
    assert body["size"] == 5
    assert build_query(" ", SPECS, [], 5, ("", ""))["query"]["bool"]["must"] == [{"match_all": {}}]


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ("colour=red", "no indexed field colour"),
        ("country", "expected field=value"),
        ("country>DE", "country is keyword; only = applies"),
        ("price=cheap", "not a number"),
        ("in_stock=yes", "takes true or false"),
    ],
)
def test_bad_filters_say_what_is_wrong(given: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_filters(SPECS, [given])
