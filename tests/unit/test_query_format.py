"""The query formatters: exact decimals, NULLs, times, bytes and nested values, without Spark."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

from pyspark.sql import Row

from changelake.read.formats import format_table, text_width, write_csv, write_json
from changelake.read.query import spark_message


def format_csv(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    out = io.StringIO()
    write_csv(columns, rows, out)
    return out.getvalue()


def format_json(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    out = io.StringIO()
    write_json(columns, rows, out)
    return out.getvalue()


COLUMNS = ["id", "total", "note"]
ROWS = [(1, Decimal("-0.10"), "a"), (22, None, None)]


def test_table_aligns_columns_and_right_aligns_numbers() -> None:
    lines = format_table(COLUMNS, ROWS).splitlines()
    assert lines == [
        " id | total | note",
        "----+-------+------",
        "  1 | -0.10 | a",
        " 22 |  NULL | NULL",
        "(2 rows)",
    ]


def test_table_counts_one_row_and_no_rows() -> None:
    assert format_table(["x"], [(1,)]).splitlines()[-1] == "(1 row)"
    assert format_table(["x"], []).splitlines() == [" x", "---", "(0 rows)"]
    assert format_table([], []) == "(0 rows)"


def test_table_keeps_rows_on_one_line_and_text_left_aligned() -> None:
    lines = format_table(["s"], [("two\nlines",), ("9",)]).splitlines()
    assert lines[2] == " two\\nlines"
    assert lines[3] == " 9"  # a digit string is text, not a number


def test_table_pads_by_display_width() -> None:
    lines = format_table(["name", "n"], [("日本", 1), ("café", 2), ("ab", 3)]).splitlines()
    assert lines[2] == " 日本 | 1"
    assert lines[3] == " café | 2"
    assert lines[4] == " ab   | 3"
    assert text_width("e\u0301") == 1  # a combining accent takes no column


def test_table_prints_booleans_times_and_bytes_readably() -> None:
    stamp = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)
    text = format_table(["b", "t", "raw"], [(True, stamp, b"\x00\xff")])
    assert " true | 2024-05-01T10:00:00+00:00 | \\x00ff" in text


def test_json_keeps_decimals_exact_and_nulls_null() -> None:
    doc = json.loads(format_json(COLUMNS, ROWS))
    assert doc == [
        {"id": 1, "total": "-0.10", "note": "a"},
        {"id": 22, "total": None, "note": None},
    ]


def test_json_writes_iso_times_with_offset_and_base64_bytes() -> None:
    plus2 = timezone(timedelta(hours=2))
    row = (datetime(2024, 5, 1, 12, 30, 0, 123456, tzinfo=plus2), date(2024, 2, 29), b"\x00\xff")
    doc = json.loads(format_json(["at", "day", "raw"], [row]))
    assert doc == [{"at": "2024-05-01T12:30:00.123456+02:00", "day": "2024-02-29", "raw": "AP8="}]


def test_json_handles_structs_arrays_maps_and_odd_floats() -> None:
    struct = Row(city="Zürich", zip=Decimal("8001"))
    row = (struct, [Decimal("1.50"), None], {1: "one"}, float("nan"))
    doc = json.loads(format_json(["addr", "list", "map", "f"], [row]))
    assert doc == [
        {
            "addr": {"city": "Zürich", "zip": "8001"},
            "list": ["1.50", None],
            "map": {"1": "one"},
            "f": "nan",
        }
    ]
    assert "Zürich" in format_json(["addr"], [(struct,)])  # readable, not \u escapes


def test_json_keeps_both_of_two_columns_with_one_name() -> None:
    doc = json.loads(format_json(["id", "id"], [(1, 2)]))
    assert doc == [{"id": 1, "id_2": 2}]


def test_json_of_no_rows_is_an_empty_array() -> None:
    assert json.loads(format_json(COLUMNS, [])) == []


def test_csv_has_a_header_exact_decimals_and_empty_nulls() -> None:
    text = format_csv(COLUMNS, ROWS)
    assert text == "id,total,note\n1,-0.10,a\n22,,\n"


def test_csv_quotes_what_needs_quoting_and_round_trips() -> None:
    stamp = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)
    rows = [('say "hi", then\nleave', stamp, b"\x01", Decimal("1E+2"), "日本")]
    text = format_csv(["s", "t", "raw", "d", "u"], rows)
    assert list(csv.reader(io.StringIO(text))) == [
        ["s", "t", "raw", "d", "u"],
        ['say "hi", then\nleave', "2024-05-01T10:00:00+00:00", "\\x01", "100", "日本"],
    ]


def test_spark_message_drops_the_jvm_stack_trace() -> None:
    raw = (
        "[TABLE_OR_VIEW_NOT_FOUND] The table or view `nope` cannot be found. SQLSTATE: 42P01\n\n"
        "JVM stacktrace:\norg.apache.spark.sql.AnalysisException: ...\n\tat org.apache.X(X.scala:1)"
    )
    assert spark_message(Exception(raw)) == (
        "[TABLE_OR_VIEW_NOT_FOUND] The table or view `nope` cannot be found. SQLSTATE: 42P01"
    )


def test_spark_message_drops_java_frames_of_a_failed_job() -> None:
    raw = (
        "[DIVIDE_BY_ZERO] Division by zero.\n"
        "\tat org.apache.spark.sql.errors.QueryExecutionErrors$.divideByZeroError(X.scala:1)\n"
        "\t... 12 more\n"
        "Driver stacktrace:\n\tat org.apache.spark.scheduler.DAGScheduler.failJob(D.scala:2)"
    )
    assert spark_message(Exception(raw)) == "[DIVIDE_BY_ZERO] Division by zero."


def test_spark_message_drops_the_unresolved_plan_of_an_analysis_error() -> None:
    raw = (
        "[TABLE_OR_VIEW_NOT_FOUND] The table or view `nope` cannot be found.\n"
        "Search path: [`spark_catalog`.`default`]. SQLSTATE: 42P01; line 1 pos 14;\n"
        "'Project [*]\n+- 'UnresolvedRelation [nope], [], false\n"
    )
    assert spark_message(Exception(raw)) == (
        "[TABLE_OR_VIEW_NOT_FOUND] The table or view `nope` cannot be found.\n"
        "Search path: [`spark_catalog`.`default`]. SQLSTATE: 42P01; line 1 pos 14"
    )


def test_csv_of_a_statement_without_columns_is_empty() -> None:
    assert format_csv([], []) == ""
