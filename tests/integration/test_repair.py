"""`changelake verify --repair`: rows deleted from and corrupted in Delta behind the pipeline's
back are re-sent by Debezium (an incremental snapshot of just those keys) and applied by the
running pipeline while a workload goes on; no resnapshot."""

from __future__ import annotations

import re
import signal
from collections.abc import Callable

import pytest
from delta.tables import DeltaTable
from pyspark.sql import functions as F

from tests.churn import CHURN_FIELDS, Churn, churn_table
from tests.integration.pipeline_fixtures import Pipeline

pytestmark = pytest.mark.stack
SEEDED = 400
CHURNED = 300  # the workload touches ids 1..300; the damage is above, so only a repair mends it
DELETED = [301, 320, 321, 322, 399]
CORRUPTED = [305, 350, 400]


def test_verify_repair_resends_what_the_lake_lost_while_a_workload_runs(
    pipeline: Callable[..., Pipeline], unique: str
) -> None:
    t = f"repair_{unique}"
    p = pipeline([t], churn_table(t, SEEDED), search={t: CHURN_FIELDS})
    proc = p.start("--trigger-seconds", "1")
    try:
        p.wait_equal(t, ["id"])  # snapshotted; idle now, so the damage commits without a race
        lake = DeltaTable.forPath(p.spark, p.path(t))
        lake.delete(F.col("id").isin(DELETED))
        lake.update(F.col("id").isin(CORRUPTED), {"name": F.lit("corrupted"), "qty": F.lit(-1)})

        churn = Churn(p.dsn, t, CHURNED, seed=3, rate=3)
        churn.start()
        try:
            repaired = p.cli("verify", t, "--repair", "--passes", "1", check=False)
        finally:
            churn.stop()
        said = repaired.stdout + repaired.stderr
        asked = re.search(rf"re-send {t} \(([\d,]+) keys\)", said)
        assert asked, said
        # the damage, and whatever the workload had changed while verify compared
        assert int(asked[1].replace(",", "")) >= len(DELETED) + len(CORRUPTED), said
        p.wait_equal(t, ["id"])
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=120)
