"""`status`'s reads without Spark (lake/quick_reads.py): the newest changelake metadata past
commits that record none, counts by SQL, a damaged log named, and an S3 lake's options."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import CommitProperties, write_deltalake

from changelake.exceptions import ChangelakeError
from changelake.lake import quick_reads
from changelake.lake.commits import CommitMeta
from changelake.settings import load_settings


def test_the_newest_metadata_is_found_past_commits_that_record_none(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    meta = CommitMeta("apply", "topic", {"0": 7}, 42, None, ("id",), extra={"writes": 3})
    rows = pa.table({"id": [1, 2, 3], "name": ["a", None, "c"]})
    write_deltalake(
        path,
        rows,
        commit_properties=CommitProperties(custom_metadata={"userMetadata": meta.to_json()}),
    )
    for _ in range(quick_reads.FIRST_LOOK + 1):  # more than the first look: OPTIMIZE-like commits
        write_deltalake(path, rows.slice(0, 1), mode="append")
    table = quick_reads.open_table(path, {})
    assert table is not None
    version, found = quick_reads.newest(table)
    assert version == quick_reads.FIRST_LOOK + 1 and found == meta
    counted = quick_reads.one_row(table, f"count(*) AS n, count({quick_reads.quoted('name')}) AS m")
    assert counted == {"n": 3 + quick_reads.FIRST_LOOK + 1, "m": 2 + quick_reads.FIRST_LOOK + 1}


def test_no_table_is_none_and_a_damaged_log_is_named(tmp_path: Path) -> None:
    assert quick_reads.open_table(str(tmp_path / "none"), {}) is None
    log = tmp_path / "bad" / "_delta_log"
    log.mkdir(parents=True)
    (log / f"{0:020d}.json").write_text("not json{")
    with pytest.raises(ChangelakeError, match=f"cannot read the Delta table at {tmp_path}/bad: "):
        quick_reads.open_table(str(tmp_path / "bad"), {})


def test_an_s3_lake_is_read_with_the_spark_session_s_settings() -> None:
    settings = replace(load_settings({}), lake="s3a://bucket/lake", s3_endpoint="http://h:7070")
    env = {"CHANGELAKE_S3_ACCESS_KEY": "fake-access", "AWS_SECRET_ACCESS_KEY": "fake-secret"}
    assert quick_reads.storage_options(settings, env) == {
        "AWS_ENDPOINT_URL": "http://h:7070",
        "AWS_REGION": "us-east-1",  # a server of one's own: the one region signing names
        "AWS_ACCESS_KEY_ID": "fake-access",
        "AWS_SECRET_ACCESS_KEY": "fake-secret",
        "AWS_ALLOW_HTTP": "true",
        "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "false",
    }
    assert quick_reads.storage_options(replace(settings, lake="/var/lake"), env) == {}


def test_status_names_a_table_it_cannot_read_and_counts_no_lag_from_nothing(
    tmp_path: Path,
) -> None:
    from changelake.read.status import _read_or_said
    from changelake.tables import TableRef

    settings = replace(load_settings({}), lake=str(tmp_path))
    ref = TableRef("public", "bad", "shop.public.bad", "shop", "slot")
    log = Path(ref.path(settings.lake)) / "_delta_log"
    log.mkdir(parents=True)
    (log / f"{0:020d}.json").write_text("not json{")
    problems: list[str] = []
    marks = {ref.topic: {0: (0, 500)}}  # 500 records: unread by a table nobody can read
    shown = _read_or_said(settings, {}, ref, marks, {}, problems)
    assert shown["rows"] is None and shown["lag_changes"] is None and shown["exists"] is None
    assert len(problems) == 1 and problems[0].startswith(
        f"bad: cannot read the Delta table at {ref.path(settings.lake)}: "
    )
