"""`changelake verify --repair`: rows deleted from and corrupted in Delta behind the pipeline's
back are re-sent by Debezium (an incremental snapshot of just those keys) and applied by the
running pipeline while a workload goes on; no resnapshot. And the pipeline's own re-sends, with
nobody running anything: a key update whose create never reached the topic (Connect stored the
offset between the two) is asked for again as soon as its delete arrives alone; a corrupted base
row and a change lost from the changelog are found by the run's continuous verification."""

from __future__ import annotations

import re
import signal
from collections.abc import Callable

import pytest
from confluent_kafka import Producer
from delta.tables import DeltaTable
from pyspark.sql import functions as F

from changelake import kafka_io
from changelake.changelog.key_changes import NEW_KEY_HEADER
from changelake.changelog.registry import SCHEMA_HEADER
from changelake.lake.commits import WRITE_CONFLICTS
from tests.churn import CHURN_FIELDS, Churn, churn_table
from tests.integration.pipeline_fixtures import Pipeline
from tests.support import wait_for

pytestmark = pytest.mark.stack
SEEDED = 400
CHURNED = 300  # the workload touches ids 1..300; the damage is above, so only a repair mends it
DELETED = [301, 320, 321, 322, 399]
CORRUPTED = [305, 350, 400]
KEY_UPDATED = 398  # the new key of a key update whose create was lost
LOST, VERIFY_CORRUPTED = 340, 360  # damaged with a continuously verifying run


def damage(change: Callable[[], None]) -> None:
    """Change the base table behind the pipeline's back, between two of its batches (a batch's
    commit meanwhile makes Delta refuse the change: try it again)."""

    def attempt() -> bool:
        try:
            change()
        except WRITE_CONFLICTS:
            return False
        return True

    wait_for(attempt, 120, "a damage committed between two batches")


def test_verify_repair_resends_what_the_lake_lost_while_a_workload_runs(
    pipeline: Callable[..., Pipeline], unique: str, bootstrap: str
) -> None:
    t = f"repair_{unique}"
    p = pipeline([t], churn_table(t, SEEDED), search={t: CHURN_FIELDS})
    proc = p.start("--trigger-seconds", "1", "--verify-share", "0")  # verify --repair's to find
    try:
        p.wait_equal(t, ["id"])  # snapshotted; idle now, so the damage commits without a race
        lake = DeltaTable.forPath(p.spark, p.path(t))
        lake.delete(F.col("id").isin(DELETED))
        lake.update(F.col("id").isin(CORRUPTED), {"name": F.lit("corrupted"), "qty": F.lit(-1)})

        churn = Churn(p.dsn, t, CHURNED, seed=3, rate=3)
        churn.start()
        try:
            repaired = p.cli("verify", "--tables", t, "--repair", "--passes", "1", check=False)
        finally:
            churn.stop()
        said = repaired.stdout + repaired.stderr
        asked = re.search(rf"re-send {t} \(([\d,]+) keys\)", said)
        assert asked, said
        # the damage, and whatever the workload had changed while verify compared
        assert int(asked[1].replace(",", "")) >= len(DELETED) + len(CORRUPTED), said
        p.wait_equal(t, ["id"])

        # A key update that lost its create: the lake misses the new key; its delete arrives
        # alone (a real delete record of the topic, carrying the header of a key update).
        damage(lambda: lake.delete(F.col("id") == KEY_UPDATED))
        topic = f"{p.prefix}.public.{t}"
        gone = next(
            r for r in kafka_io.read(bootstrap, topic) if (r.payload or {}).get("op") == "d"
        )
        raw = kafka_io.fetch_one(bootstrap, topic, gone.partition, gone.offset)
        producer = Producer({"bootstrap.servers": bootstrap})
        header = (NEW_KEY_HEADER, f'{{"id":{KEY_UPDATED}}}'.encode())
        schema = [(k, v) for k, v in raw.headers.items() if k == SCHEMA_HEADER]  # lean records'
        headers = [*schema, header]
        producer.produce(topic, key=raw.key, value=raw.value, headers=headers)
        producer.produce(topic, key=raw.key, value=None, headers=[header])  # its tombstone
        assert producer.flush(30) == 0
        p.wait_equal(t, ["id"])
    finally:
        proc.send_signal(signal.SIGTERM)
        output = proc.communicate(timeout=120)[0]
        print(output)  # shown if the test fails
    assert f"{t}: a key update's new row never reached the topic (id={KEY_UPDATED})" in output

    # Continuous verification: a change lost from the lake once applied (its row set back), and
    # a row corrupted.
    proc = p.start("--verify-share", "0.5")
    try:
        p.sql(f"UPDATE {t} SET name = 'lost' WHERE id = {LOST}")

        def lost_changes() -> int:
            rows = p.spark.read.format("delta").load(p.path(t))
            return rows.where((F.col("id") == LOST) & (F.col("name") == "lost")).count()

        wait_for(lost_changes, 120, "the change in the lake")
        damage(lambda: lake.update(F.col("id") == LOST, {"name": F.lit(f"seed {LOST}")}))
        damage(lambda: lake.update(F.col("id") == VERIFY_CORRUPTED, {"qty": F.lit(-7)}))
        p.wait_equal(t, ["id"])
    finally:
        proc.send_signal(signal.SIGTERM)
        output = proc.communicate(timeout=120)[0]
        print(output)
    found = re.findall(rf"{t}: verification found ([\d,]+) rows the lake lacks", output)
    assert sum(int(n.replace(",", "")) for n in found) >= 2, output
