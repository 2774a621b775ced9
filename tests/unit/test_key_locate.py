"""Locating the current rows of changed keys in a base table's files: rows a deletion vector marks
are not current, a change no newer than the row is a replay, files whose key statistics cannot
hold a changed key are not read. Parquet files under tmp_path, read with pyarrow; no Spark."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from changelake.changelog.decode import LSN
from changelake.lake.driver_files import read_local, s3_options
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


def test_spark_s_int96_timestamps_far_from_now_and_keys_a_file_lacks(tmp_path: Path) -> None:
    """Spark stores timestamps as INT96: a 9999-12-31 sentinel must read as itself (pyarrow's
    nanoseconds would wrap it); a file written before a key column existed holds no row of it.
    Read by the driver's own reader, from a folder whose name a URL parser would cut."""
    folder = tmp_path / "a#b?c"
    folder.mkdir()
    far = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)
    stored = pa.table({"id": pa.array([far], pa.timestamp("us", tz="UTC")), LSN: [3]})
    pq.write_table(stored, folder / "t.parquet", use_deprecated_int96_timestamps=True)
    pq.write_table(pa.table({LSN: [1]}), folder / "old.parquet")
    files = [
        DataFile(n, f"file:{folder}/{n}", 1, {}, {}, _Add(False))
        for n in ("t.parquet", "old.parquet")
    ]
    changes = pa.table({"id": pa.array([far], pa.timestamp("us", tz="UTC")), LSN: [4]})
    found = locate(files, changes, ("id",), read_local, None)  # type: ignore[arg-type]
    assert found.gone == {"t.parquet": [0]}


def test_s3_options_follow_the_bucket_s_own_settings_first() -> None:
    settings = {
        "fs.s3a.endpoint": "http://elsewhere:1",
        "fs.s3a.bucket.lake.endpoint": "127.0.0.1:9000",
        "fs.s3a.bucket.lake.connection.ssl.enabled": "false",
        "fs.s3a.path.style.access": "true",
        "fs.s3a.endpoint.region": "us-east-1",
        "fs.s3a.bucket.lake.access.key": "fake-access",
        "fs.s3a.bucket.lake.secret.key": "fake-secret",
        "fs.s3a.session.token": "fake-token",
    }
    assert s3_options(settings.get, "lake") == {
        "endpoint_override": "127.0.0.1:9000",
        "scheme": "http",
        "force_virtual_addressing": False,
        "region": "us-east-1",
        "access_key": "fake-access",
        "secret_key": "fake-secret",
        "session_token": "fake-token",
    }
    assert s3_options(settings.get, "other")["endpoint_override"] == "elsewhere:1"


def test_text_and_date_statistics_prune_unless_cut_short() -> None:
    def file(name: str, low: Any, high: Any) -> DataFile:
        return DataFile(name, name, 1, {"k": low}, {"k": high}, _Add(False))

    long = "m" * 40  # Delta keeps 32 characters: such a bound says nothing
    files = [file("ab", "a", "b"), file("xy", "x", "y"), file("cut", long[:32], long[:32] + "~")]
    picked = candidates(files, "k", pa.chunked_array([["apple", "zzz"]]))
    assert [f.name for f in picked] == ["ab", "cut"]
    days = [file("jan", "2026-01-01", "2026-01-31"), file("feb", "2026-02-01", "2026-02-28")]
    picked = candidates(days, "k", pa.chunked_array([[date(2026, 2, 14)]], pa.date32()))
    assert [f.name for f in picked] == ["feb"]
