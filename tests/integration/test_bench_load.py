"""The benchmark's pgbench load: the shop mix without errors, and the row changes it reports are
the ones logical decoding delivers (every rate in the report is divided by them)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from changelake.bench import stages
from changelake.bench.pgbench_load import SCRIPTS, run_pgbench
from changelake.demo.ops import OPERATIONS
from changelake.demo.seed import seed
from changelake.settings import Settings
from tests.support import scratch_database

SHOP = Path(__file__).resolve().parents[2] / "schemas" / "shop.sql"


@pytest.fixture
def shop_copy(admin_dsn: str, unique: str) -> Iterator[str]:
    """A database of the test's own with the shop's tables, seeded; dropped afterwards."""
    with scratch_database(admin_dsn, f"load_{unique}") as dsn:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(SHOP.read_text())
            conn.execute("CREATE PUBLICATION load_check FOR TABLES IN SCHEMA public")
        seed(dsn, 300, progress=lambda _: None)
        yield dsn


def test_pgbench_runs_the_shop_mix_and_counts_what_decoding_sees(
    settings: Settings, shop_copy: str, tmp_path: Path, unique: str
) -> None:
    assert {name: weight for name, (_, weight) in SCRIPTS.items()} == {
        name: weight for name, (_, weight) in OPERATIONS.items()
    }
    slot = f"load_{unique}"
    with psycopg.connect(shop_copy) as conn:
        seeded = conn.execute("SELECT max(id) FROM public.orders").fetchone()
    stages.create_decoding_slot(shop_copy, slot)
    run = run_pgbench(
        settings.postgres_bin / "pgbench", shop_copy, 200, 2, tmp_path / "load", seed=5
    )
    decoded = stages.decode(shop_copy, slot, "load_check")
    assert run.failed == 0
    assert run.transactions >= 300  # of ~400 asked for; a busy machine runs late, not idle
    # A deadlock retried counts its rolled-back attempt in the statistics, never in the WAL.
    assert run.row_changes == decoded.changes or (run.retried and run.row_changes > decoded.changes)
    assert run.row_changes >= run.transactions  # ~2 per operation; a few find no row
    with psycopg.connect(shop_copy) as conn:
        placed, unbalanced = conn.execute(
            "SELECT count(*), count(*) FILTER (WHERE o.total IS DISTINCT FROM (SELECT"
            " sum(qty * unit_price) FROM public.order_lines l WHERE l.order_id = o.id))"
            " FROM public.orders o WHERE o.id > %s",
            seeded,
        ).fetchone() or (0, 0)
    assert placed > 0 and unbalanced == 0  # each order is placed whole, with its lines
