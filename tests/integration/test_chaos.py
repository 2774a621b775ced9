"""The short form of `make chaos`, run by it (`pytest -m chaos`): one round of every fault
while a workload churns the test's own table (and inserts stream to its own event table while
Connect is killed); `changelake verify` and the tests' own comparison both find nothing."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from changelake import kafka_io
from changelake.capture import connectors
from changelake.capture.topic_groups import events_group
from changelake.chaos.event_kill import EventTable
from changelake.chaos.faults import KINDS
from changelake.chaos.runner import Chaos, ChaosOptions
from changelake.settings import Settings
from tests.churn import CHURN_FIELDS, Churn, churn_table
from tests.integration.pipeline_fixtures import Pipeline
from tests.support import SLOW_ACKS

pytestmark = [pytest.mark.stack, pytest.mark.chaos]  # ~7 minutes: `make chaos`, not `make test`
SEEDED = 300


CONNECT_CLUES = ("WalPositionLocator", "ncremental snapshot", "EXECUTE_SNAPSHOT")


def evidence(
    bootstrap: str,
    topic: str,
    report: dict[str, Any],
    out: Path,
    connect_log: Path | None = None,
    since: str = "",
) -> str:
    """What a failure needs said: verify's report, every record the topic holds for each missing
    key (none: Debezium never sent its change; some: the pipeline dropped it), the pipeline's
    lines about key updates and restarts, and Connect's lines (from `since`, its log's time
    format) on where Debezium resumed and what it re-sent."""
    missing = {
        int(m.group(1))
        for table in report["tables"]
        for side in ("delta", "index")
        if table[side]
        for line in table[side]["samples"]
        if (m := re.fullmatch(r"missing (\d+)", line))
    }
    found: dict[int, list[str]] = {k: [] for k in missing}
    for record in kafka_io.read(bootstrap, topic, timeout_s=120):
        key = record.key_payload
        if isinstance(key, dict) and key.get("id") in found:
            value = record.payload or {}
            source = value.get("source") or {}
            marks = sorted(h for h in record.headers if h.endswith("key"))  # a key update's
            found[key["id"]].append(
                f"offset {record.offset}: op {value.get('op')} lsn {source.get('lsn')}"
                f" txId {source.get('txId')} {marks}"
            )
    lines = [json.dumps(report)]
    lines += [f"key {k} in {topic}: {found[k] or 'no record'}" for k in sorted(found)]
    log = out / "pipeline.log"
    if log.exists():
        lines += [
            line
            for line in log.read_text(errors="replace").splitlines()
            if "key update" in line or "restarted" in line or "changelake run:" in line
        ]
    if connect_log is not None and connect_log.exists():
        with connect_log.open(errors="replace") as text:
            clues = [
                line.rstrip()
                for line in text
                if line[1:24] >= since and any(clue in line for clue in CONNECT_CLUES)
            ]
        lines += clues[-80:]
    return "\n".join(lines)


def test_one_round_of_every_fault_leaves_lake_and_index_equal(
    pipeline: Callable[..., Pipeline], unique: str, settings: Settings, tmp_path: Path
) -> None:
    t, audit = f"chaos_{unique}", f"audit_{unique}"
    began = time.strftime("%Y-%m-%d %H:%M:%S")  # Connect's log times (this machine's zone)
    template = connectors.load(settings.connectors_dir / "shop-postgres.json")[0]
    assert template is not None
    p = pipeline(
        [t, audit],
        [
            *churn_table(t, SEEDED),
            f"CREATE TABLE public.{audit} (what text, n int)",  # no key: an event table
            f"ALTER TABLE public.{audit} REPLICA IDENTITY FULL",
        ],
        search={t: CHURN_FIELDS},
        connector={
            **SLOW_ACKS,  # a bulk streams long enough for the stop to land inside its COPY
            "topic.creation.groups": f"{template.config['topic.creation.groups']},events",
            **events_group("", [f"public.{audit}"]),
            "topic.creation.events.include": rf".*\.public\.{audit}",  # whatever the prefix
        },
    )
    p.caught_up()
    connector = p.prefix.replace("_", "-")
    options = ChaosOptions(
        rounds=1,
        rate=20,
        seed=5,
        gap_s=(1.0, 4.0),
        outage_s=(3.0, 8.0),
        connector=connector,  # the shop connector reads the same WAL
        events=EventTable(p.dsn, f"public.{audit}", f"{p.prefix}.public.{audit}", connector),
    )

    def churn(seed: int) -> Churn:
        return Churn(p.dsn, t, SEEDED, seed, options.rate)

    chaos = Chaos(settings, p.env, churn, tmp_path / "chaos", print)
    summary = chaos.run(options)

    assert dict(summary.faults) == dict.fromkeys(KINDS, 1)
    (round_,) = summary.rounds
    assert round_.row_changes > 50, "the workload must have changed rows around the faults"
    assert summary.landed["stop-connect-in-bulk"] == 1, "Connect stopped inside the bulk's COPY"
    assert summary.resends >= 1, "the first-event resume was repaired by the pipeline itself"
    assert round_.rows_compared >= 2 * 200  # the table and its index, compared row by row
    assert summary.differences == 0, evidence(
        settings.kafka_bootstrap,
        f"{p.prefix}.public.{t}",
        round_.report,
        tmp_path / "chaos",
        settings.logs / "connect.log",
        began,
    )
    p.assert_equal(t, ["id"])  # and by the tests' own comparison, not only verify's
