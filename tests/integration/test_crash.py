"""Exactly once, proven: SIGKILL the pipeline at awkward moments; after a restart every derived
row equals its source, nothing lost and nothing duplicated."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from changelake import kafka_io
from tests.integration.pipeline_fixtures import Pipeline

pytestmark = pytest.mark.stack


def churn(p: Pipeline, t: str, round_no: int) -> None:
    """Inserts, updates, deletes and a key change, different each round."""
    base = 1000 * round_no
    p.sql(
        f"INSERT INTO public.{t} SELECT i, 'round {round_no}', i * 0.5 FROM"
        f" generate_series({base}, {base + 99}) i"
    )
    p.sql(f"UPDATE public.{t} SET qty = qty + 1, name = name || '+' WHERE id % 7 = {round_no % 7}")
    p.sql(f"DELETE FROM public.{t} WHERE id % 11 = {round_no}")
    p.sql(f"UPDATE public.{t} SET id = id + 500 WHERE id = {base + 1}")


def test_sigkill_during_snapshot_batch_and_after_commit(
    pipeline: Callable[..., Pipeline], unique: str
) -> None:
    t = f"crash_{unique}"
    p = pipeline(
        [t],
        [
            f"CREATE TABLE public.{t} (id int PRIMARY KEY, name text, qty numeric(10,1))",
            f"INSERT INTO public.{t} SELECT i, 'seed', i FROM generate_series(1, 300) i",
        ],
        views={f"{t}_history": {"kind": "history", "table": t}},
    )
    p.caught_up()

    # 1. During the snapshot, before its one append commits: the restart snapshots again.
    proc = p.start("--once", fault=f"before-snapshot-commit:{t}")
    p.kill_when_paused(proc, "before-snapshot-commit", t)
    p.run_once()
    p.assert_equal(t, ["id"])

    # 2. During a batch, before its write: nothing of it is in the base table yet.
    churn(p, t, 1)
    p.caught_up()
    proc = p.start(fault=f"before-write:{t}")
    p.kill_when_paused(proc, "before-write", t)

    # 3. After the write committed, before the batch ended (its index not written): the
    #    restart begins at the offsets the commit recorded, so nothing of the batch is applied
    #    twice, and its index is caught up from the table's versions.
    churn(p, t, 2)
    p.caught_up()
    proc = p.start(fault=f"after-commit:{t}")
    p.kill_when_paused(proc, "after-commit", t)
    # Rounds 1 and 2 are in the base table: Spark and the README's recipe without it alike.
    p.assert_equal(t, ["id"])
    p.assert_equal_outside_spark(t, ["id"])

    churn(p, t, 4)
    p.run_once()
    p.assert_equal(t, ["id"])
    assert_history(p, t)


def assert_history(p: Pipeline, t: str) -> None:
    """Through the kills (one after the history's append, before the base table's, so that batch
    was appended to the history twice): its current versions are the table's rows, and it holds
    one version per insert and update the topic holds (the snapshot's reads included), each once."""
    report = json.loads(p.cli("verify", "--json").stdout)
    checks = {c["table"]: c for c in report["tables"]}
    assert checks[f"{t}_history"]["equal"], checks[f"{t}_history"]
    made = sum(
        1
        for r in kafka_io.read(p.settings.kafka_bootstrap, p.alias(t))
        if r.payload and r.payload["op"] in ("c", "u", "r")
    )
    shown = p.cli("query", f"SELECT count(*) AS n FROM {t}_history", "--json").stdout
    assert json.loads(shown) == [{"n": made}]
