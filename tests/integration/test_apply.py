"""The derived Delta table equals its source after the snapshot and after every kind of change."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from changelake import kafka_io
from tests.integration.pipeline_fixtures import Pipeline

pytestmark = pytest.mark.stack
BIG = "toasted 渡辺 " * 1500  # ~20 KB: stored out of line under STORAGE EXTERNAL


def test_snapshot_then_changes_then_truncate(
    pipeline: Callable[..., Pipeline], bootstrap: str, unique: str
) -> None:
    """On a topic of three partitions: Debezium spreads the keys over them, so a key update's
    delete and create, and a truncate (no key), land in different partitions, read in any order;
    the changes are applied in LSN order all the same."""
    t = f"acct_{unique}"
    p = pipeline(
        [t],
        [
            f"CREATE TABLE public.{t} (id bigint PRIMARY KEY, name text, balance numeric(12,2),"
            " notes text, updated_at timestamptz)",
            # DEFAULT replica identity on purpose: updates then carry the TOAST placeholder.
            f"ALTER TABLE public.{t} ALTER COLUMN notes SET STORAGE EXTERNAL",
            f"INSERT INTO public.{t} SELECT i, 'name ' || i, (i * 1.25 - 30)::numeric(12,2),"
            f" CASE WHEN i % 5 = 0 THEN '{BIG}' || i ELSE 'short ' || i END,"
            " now() - i * interval '1 minute 0.000001 second' FROM generate_series(1, 60) i",
        ],
        connector={"topic.creation.default.partitions": "3"},
    )
    p.run_once()
    assert p.assert_equal(t, ["id"]) == 60
    marks = kafka_io.watermarks(bootstrap, f"{p.prefix}.public.{t}")
    assert len(marks) == 3 and all(high > 0 for _, high in marks.values()), marks

    changes = [
        # placeholder: the TOASTed notes are untouched, the stored value must stay
        f"UPDATE public.{t} SET name = 'renamed ' || id WHERE id % 5 = 0",
        # several changes to one key in one batch collapse to the newest
        f"UPDATE public.{t} SET balance = balance + 1 WHERE id = 7",
        f"UPDATE public.{t} SET balance = balance + 1 WHERE id = 7",
        f"UPDATE public.{t} SET balance = -0.01 WHERE id = 7",
        # inserted with a big value, then updated in the same batch: placeholder resolved
        # from the insert, not from the table (which has no such row yet)
        f"INSERT INTO public.{t} VALUES (100, 'new', 1.10, '{BIG}new', now())",
        f"UPDATE public.{t} SET name = 'newer' WHERE id = 100",
        # deleted, and deleted-then-reinserted
        f"DELETE FROM public.{t} WHERE id IN (2, 3)",
        f"DELETE FROM public.{t} WHERE id = 4",
        f"INSERT INTO public.{t} VALUES (4, 'back', 4.00, 'again', now())",
        # primary-key change moves the row
        f"UPDATE public.{t} SET id = 1001 WHERE id = 11",
        f"UPDATE public.{t} SET id = 1011, name = 'moved again' WHERE id = 1001",
        f"UPDATE public.{t} SET id = 2001 WHERE id = 13",
    ]
    for statement in changes:
        p.sql(statement)
    p.run_once()
    assert p.assert_equal(t, ["id"]) == 59

    p.sql(f"TRUNCATE public.{t}")
    p.sql(
        f"INSERT INTO public.{t} VALUES (1, 'after truncate', 0.00, NULL, NULL),"
        f" (500, 'x', NULL, '{BIG}', now())"
    )
    p.run_once()
    assert p.assert_equal(t, ["id"]) == 2

    # Upkeep: the batches' small files packed, nothing a reader needs deleted, reads equal.
    done = p.cli("maintain", "--tables", t).stdout
    before, after = map(int, re.findall(rf"{t}: ([\d,]+) files → ([\d,]+) after", done)[0])
    assert 1 <= after <= before, done
    assert p.assert_equal(t, ["id"]) == 2
    unsafe = p.cli("maintain", "--tables", t, "--retain-hours", "1", check=False)
    assert unsafe.returncode == 1 and "--retain-hours 1: below" in unsafe.stderr
