"""`changelake query` exports: any number of rows, streamed to a file as CSV, JSON or one
Parquet file, never half-written; the printed table keeps its cap and says how to export."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from changelake.exceptions import ChangelakeError
from changelake.read.export import export, format_of
from changelake.read.query import run_query
from changelake.settings import Settings, load_settings

# More rows than a printed table may have, two columns named alike, a timestamp and a decimal.
SQL = (
    "SELECT id, id AS id, cast(id AS decimal(12,2)) / 4 AS quarter,"
    " timestamp_seconds(id) AS at FROM range(25000)"
)


@pytest.fixture
def lake(tmp_path: Path, spark: SparkSession) -> Settings:
    return load_settings({**os.environ, "CHANGELAKE_LAKE": str(tmp_path / "lake")})


def test_csv_json_and_parquet_hold_every_row(lake: Settings, tmp_path: Path) -> None:
    said: list[str] = []
    assert export(lake, SQL, "csv", tmp_path / "out.csv", said.append) == 25000
    with (tmp_path / "out.csv").open() as handle:
        rows = list(csv.reader(handle))
    assert rows[0] == ["id", "id", "quarter", "at"] and len(rows) == 25001
    assert rows[7] == ["6", "6", "1.500000", "1970-01-01T00:00:06+00:00"]
    assert said == [f"wrote 25,000 rows to {tmp_path / 'out.csv'}"]

    export(lake, SQL, format_of(None, tmp_path / "out.json"), tmp_path / "out.json", said.append)
    doc = json.loads((tmp_path / "out.json").read_text())
    assert len(doc) == 25000 and doc[6] == {
        "id": 6,
        "id_2": 6,
        "quarter": "1.500000",
        "at": "1970-01-01T00:00:06+00:00",
    }

    export(lake, SQL, "parquet", tmp_path / "out.parquet", said.append)
    table = pq.read_table(tmp_path / "out.parquet")
    assert table.num_rows == 25000 and table.column_names == ["id", "id_2", "quarter", "at"]
    assert str(table.schema.field("at").type) == "timestamp[us, tz=UTC]"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_a_failing_query_leaves_no_file_and_the_table_says_how_to_export(
    lake: Settings, tmp_path: Path
) -> None:
    target = tmp_path / "bad.csv"
    with pytest.raises(ChangelakeError, match=r"DIVIDE_BY_ZERO|divide"):
        export(lake, "SELECT 1 / (id - 20000) FROM range(25000)", "csv", target)
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ChangelakeError, match="more than 10,000 rows to print") as refused:
        run_query(lake, SQL)
    assert "--output FILE" in str(refused.value)
    with pytest.raises(ChangelakeError, match=r"cannot tell the format from '\.txt'"):
        format_of(None, tmp_path / "out.txt")
