"""What re-syncing the bench shop costs: with the pipeline streaming, the connector's replication
slot is dropped while the load writes for GAP_S seconds (the connector stopped for the drop, as
`make chaos`'s fault does it). Timed from the drop: until the run notices (its `resync.json` names
the connector; it looks while the load writes, and re-syncs at once, resuming the connector on a
new slot: the gap lasts until then), until it has re-synced by itself (the entry gone), and until
`changelake verify` finds every table equal to the source. Nobody resumes the connector: a resume
between the run's stop and its moving of the offset would start it from the lost position. Rows sent
again: every row of the bench tables (an incremental snapshot reads each), and the rows the run
deleted as deleted during the gap."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

import psycopg
from psycopg import sql

from changelake.apply.resync import pending
from changelake.capture.connect_api import ConnectApi
from changelake.capture.removal import drop_replication_slot, stop_connector
from changelake.capture.source import source_of
from changelake.chaos.pipeline_process import PipelineProcess
from changelake.exceptions import ChangelakeError, first_line
from changelake.settings import Settings

GAP_S = 30.0  # of load while no slot keeps its changes
NOTICED_WITHIN_S = 180.0
RESYNC_WITHIN_S = 3600.0
# verify waits for the pipeline to apply what the source has committed, here every row sent
# again: at the bench's scale that is minutes, past verify's default wait.
VERIFY_WAITS_S = 3600.0
DELETED = re.compile(r"re-sync of \S+ done: .*?([\d,]+) rows deleted during the gap")


class ResyncCost(TypedDict):
    rate: float  # transactions/s of the load in the gap
    gap_s: float
    noticed_s: float  # from the slot's drop until the run began the re-sync
    resynced_s: float  # … until it had re-synced
    equal_s: float | None  # … until verify found every table equal (None: it did not)
    rows_resent: int  # the bench tables' rows when the re-sync ended: all read again
    deleted: int | None  # rows the run deleted as deleted in the gap (None: not in its log)


@dataclass(frozen=True)
class ResyncRun:
    settings: Settings  # the bench's (its database and run directory)
    dsn: str  # the bench database's
    env: Mapping[str, str]
    log_dir: Path
    connector: str
    tables: Sequence[str]  # the source tables, schema-qualified
    load: Callable[[float, float], Any]  # (transactions/s, seconds): blocks while it loads
    streaming: Callable[[], bool]
    wait: Callable[[Callable[[], bool], str, float], None]
    say: Callable[[str], None]


def measure(run: ResyncRun, rate: float) -> ResyncCost | None:
    """The phase's figures; None when it failed (said: the bench's other figures still count)."""
    try:
        return _measure(run, rate)
    except (ChangelakeError, TimeoutError, OSError) as exc:
        run.say(f"bench: the re-sync phase failed ({first_line(exc)}): no re-sync figures")
        return None


def _measure(run: ResyncRun, rate: float) -> ResyncCost:
    log = run.log_dir / "resync-pipeline.log"
    pipeline = PipelineProcess(run.env, log)
    pipeline.start()
    try:
        run.wait(run.streaming, "the pipeline streaming before the slot is dropped", 900.0)
        api = ConnectApi(run.settings.connect_url)
        config = api.connector_config(run.connector) or {}
        stop_connector(api, run.connector, 60.0, "the slot was not dropped")
        drop_replication_slot(source_of(run.settings, config), config["slot.name"])
        dropped = time.monotonic()
        run.say(f"bench: slot {config['slot.name']} dropped; {GAP_S:.0f} s of load at {rate:g}/s")
        run_dir, connector = run.settings.run_dir, run.connector
        with ThreadPoolExecutor(1) as pool:  # the run looks, and re-syncs, while the load writes
            loading = pool.submit(run.load, rate, GAP_S)
            run.wait(
                lambda: connector in pending(run_dir),
                "the run to begin re-syncing",
                NOTICED_WITHIN_S,
            )
            noticed = time.monotonic() - dropped
            loading.result()  # its error, if it failed
        run.wait(lambda: connector not in pending(run_dir), "the re-sync", RESYNC_WITHIN_S)
        resynced = time.monotonic() - dropped
        rows = _rows(run.dsn, run.tables)
        equal = _verify(run.env, run.log_dir / "resync-verify.log")
        equal_s = time.monotonic() - dropped if equal else None
    finally:
        pipeline.stop()
    found = DELETED.findall(log.read_text(errors="replace"))
    cost = ResyncCost(
        rate=rate,
        gap_s=GAP_S,
        noticed_s=noticed,
        resynced_s=resynced,
        equal_s=equal_s,
        rows_resent=rows,
        deleted=int(found[-1].replace(",", "")) if found else None,
    )
    run.say(
        f"bench: re-sync noticed in {noticed:.0f} s, done in {resynced:.0f} s, equal in "
        + (f"{equal_s:.0f} s" if equal_s is not None else "- (verify found differences)")
        + f"; {rows:,} rows sent again, {cost['deleted'] or 0:,} deleted as gone"
    )
    return cost


def _rows(dsn: str, tables: Sequence[str]) -> int:
    counted = 0
    with psycopg.connect(dsn) as conn:
        for table in tables:
            query = sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(*table.split(".")))
            row = conn.execute(query).fetchone()
            counted += int(row[0]) if row else 0
    return counted


def _verify(env: Mapping[str, str], log: Path) -> bool:
    """`changelake verify` of the bench's tables, as its own process; True when all equal."""
    with log.open("wb") as out:
        done = subprocess.run(
            [sys.executable, "-m", "changelake.cli", "verify", "--timeout", str(VERIFY_WAITS_S)],
            env=dict(env),
            stdout=out,
            stderr=subprocess.STDOUT,
            check=False,
        )
    return done.returncode == 0


def resync_section(cost: ResyncCost | None) -> list[str]:
    """The report's paragraph on it (older results: nothing)."""
    if not cost:
        return []
    equal = f"{cost['equal_s']:.0f} s" if cost["equal_s"] is not None else "never (verify differed)"
    deleted = f"{cost['deleted']:,}" if cost["deleted"] is not None else "an unknown number of"
    return [
        "## What re-syncing a lost slot costs",
        f"The pipeline streaming, the connector's replication slot dropped while the load wrote "
        f"{cost['gap_s']:.0f} s at {cost['rate']:g} transactions/s: the run began re-syncing by "
        f"itself {cost['noticed_s']:.0f} s after the drop (the load still writing; capture "
        f"resumed from a new slot then) and had re-synced {cost['resynced_s']:.0f} s after it "
        f"({cost['rows_resent']:,} rows sent again by an incremental snapshot, {deleted} rows "
        f"deleted as deleted in the gap); every table equal to the source (`changelake verify`) "
        f"{equal} after the drop.",
    ]
