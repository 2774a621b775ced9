"""Locating the current rows of changed keys in a base table's files: rows a deletion vector marks
are not current, a change no newer than the row is a replay, files whose key statistics cannot
hold a changed key are not read. Parquet files under tmp_path, read with pyarrow; no Spark."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from changelake.changelog.decode import LSN
from changelake.sinks.delta_jvm import DataFile
from changelake.sinks.key_locate import Positions, candidates, locate


class _Add:
    """What a located file needs of the JVM's AddFile: whether it has a deletion vector."""

    def __init__(self, marked: bool):
        self.marked = marked

    def deletionVector(self) -> object | None:  # the JVM's name
        return object() if self.marked else None


def _file(folder: Path, name: str, rows: dict[str, list[Any]], marked: bool = False) -> DataFile:
    path = folder / name
    pq.write_table(pa.table(rows), path)
    keys = [k for k in rows["id"] if k is not None]
    stats = ({"id": min(keys)}, {"id": max(keys)}) if isinstance(keys[0], int) else ({}, {})
    return DataFile(name, f"file:{path}", len(keys), stats[0], stats[1], _Add(marked))


def _read(log: list[str]) -> Any:
    def read(uri: str, columns: Sequence[str]) -> pa.Table:
        log.append(uri.rsplit("/", 1)[-1])
        return pq.read_table(uri.removeprefix("file:"), columns=list(columns))

    return read


def _changes(keys: list[Any], lsns: list[int], key_type: pa.DataType) -> pa.Table:
    return pa.table({"id": pa.array(keys, key_type), LSN: pa.array(lsns, pa.int64())})


def test_newer_changes_replace_current_rows_and_older_ones_are_replays(tmp_path: Path) -> None:
    first = _file(tmp_path, "a.parquet", {"id": [1, 2, 3, 4], LSN: [10, 10, 10, 10]}, marked=True)
    second = _file(tmp_path, "b.parquet", {"id": [2, 5, 6], LSN: [20, 20, 20]})
    deleted: dict[str, Positions] = {"a.parquet": np.array([1], dtype=np.int64)}  # old id 2
    read_files: list[str] = []
    found = locate(
        [first, second],
        _changes([2, 3, 5, 9], [30, 30, 15, 30], pa.int64()),
        ("id",),
        _read(read_files),
        lambda file: deleted[file.name],
    )
    # 2's current row is in b (a's is marked deleted), 3's in a; 5's change is older than its
    # row (a replay); 9 is new (nothing to replace)
    assert found.gone == {"a.parquet": [2], "b.parquet": [0]}
    assert found.stale == [(5,)]
    assert sorted(read_files) == ["a.parquet", "b.parquet"]


def test_files_whose_statistics_cannot_hold_a_changed_key_are_not_read(tmp_path: Path) -> None:
    low = _file(tmp_path, "low.parquet", {"id": [1, 2, 3], LSN: [1, 1, 1]})
    high = _file(tmp_path, "high.parquet", {"id": [100, 200], LSN: [1, 1]})
    unknown = DataFile("u.parquet", f"file:{tmp_path}/u.parquet", 1, {}, {}, _Add(False))
    pq.write_table(pa.table({"id": [150], LSN: [1]}), tmp_path / "u.parquet")
    files = [low, high, unknown]
    assert [f.name for f in candidates(files, "id", pa.chunked_array([[50, 150]]))] == [
        "high.parquet",
        "u.parquet",
    ]
    read_files: list[str] = []
    found = locate(files, _changes([150], [2], pa.int64()), ("id",), _read(read_files), None)  # type: ignore[arg-type]
    assert found.gone == {"u.parquet": [0]}
    assert read_files == ["high.parquet", "u.parquet"]


def test_compound_and_timestamp_keys_match_across_stored_types(tmp_path: Path) -> None:
    at = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
    stored = pa.table(
        {
            "id": pa.array([at.replace(tzinfo=None), at.replace(tzinfo=None)], pa.timestamp("ns")),
            "part": ["x", "y"],
            LSN: [5, 5],
        }
    )
    pq.write_table(stored, tmp_path / "t.parquet")
    file = DataFile("t.parquet", f"file:{tmp_path}/t.parquet", 2, {}, {}, _Add(False))
    changes = pa.table(
        {
            "id": pa.array([at], pa.timestamp("us", tz="UTC")),
            "part": ["y"],
            LSN: pa.array([6], pa.int64()),
        }
    )
    found = locate([file], changes, ("id", "part"), _read([]), None)  # type: ignore[arg-type]
    assert found.gone == {"t.parquet": [1]}
    assert found.stale == []
