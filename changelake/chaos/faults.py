"""The nine kinds of fault, each injected and then healed before the next one.

Every fault is something that happens to real deployments: the pipeline host dies, Connect
is redeployed or crashes (also in the middle of a bulk load, resuming where Debezium skips
the rest of a bulk statement's LSN, and while an event table streams), the broker restarts,
Postgres restarts, the search cluster is away for a while, the replication slot is dropped
while the source keeps writing. A fault returns a line saying exactly what was done.
"""

from __future__ import annotations

import random
import signal
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from changelake.apply.resync import pending
from changelake.capture import connectors
from changelake.capture.connect_api import ConnectApi, quote
from changelake.capture.removal import drop_replication_slot, stop_connector
from changelake.capture.source import source_of
from changelake.chaos.bulk_stop import stop_connect_inside
from changelake.chaos.event_kill import EventTable, kill_connect_under_events
from changelake.chaos.first_event import resume_at_first_event
from changelake.chaos.pipeline_process import PipelineProcess
from changelake.chaos.workload import Workload
from changelake.exceptions import ChangelakeError
from changelake.settings import Settings
from changelake.stack import manager, process
from changelake.waiting import wait_until

KINDS = (
    "kill-pipeline",
    "restart-connect",
    "stop-connect-in-bulk",
    "resume-at-first-event",
    "kill-connect-events",
    "restart-kafka",
    "restart-postgres",
    "stop-opensearch",
    "drop-slot",
)
RESYNC_WAIT_S = 900.0  # for the running pipeline to re-sync after the slot was dropped


@dataclass
class FaultContext:
    settings: Settings
    pipeline: PipelineProcess
    rng: random.Random
    say: Callable[[str], None]
    outage_s: tuple[float, float] = (5.0, 20.0)  # how long OpenSearch stays away
    workload: Workload | None = None  # the round's load
    connector: str | None = None  # the one whose offsets time the stop inside a bulk
    events: EventTable | None = None  # the event table Connect is killed under
    # Faults that landed where they meant to (a stop inside a bulk transaction's COPY, a kill
    # that made Debezium send an event table's changes again), by fault kind.
    landed: Counter[str] = field(default_factory=Counter)


def inject(kind: str, ctx: FaultContext) -> str:
    return FAULTS[kind](ctx)


def kill_pipeline(ctx: FaultContext) -> str:
    ctx.pipeline.kill()
    ctx.pipeline.start()
    return "SIGKILL to `changelake run` and its Spark JVM, then started again"


def restart_connect(ctx: FaultContext) -> str:
    # Half the time a crash: Debezium's offsets then lag what it already wrote to Kafka, so
    # changes arrive twice and the LSN guard must absorb them.
    hard = ctx.rng.random() < 0.5
    how = "SIGKILL" if hard else "graceful stop"
    _bounce(ctx, "connect", signal.SIGKILL if hard else None)
    return f"Kafka Connect: {how}, then started again"


def stop_connect_in_bulk(ctx: FaultContext) -> str:
    """The workload commits a bulk transaction; Connect stops once it has stored an offset
    inside that transaction's COPY (gracefully or by SIGKILL), and starts again."""
    if ctx.workload is None:
        raise ValueError("stop-connect-in-bulk needs the round's workload")
    stop = stop_connect_inside(
        ctx.settings, ctx.workload.bulk, hard=ctx.rng.random() < 0.5, connector=ctx.connector
    )
    ctx.landed["stop-connect-in-bulk"] += stop.inside
    return stop.describe()


def resume_first_event(ctx: FaultContext) -> str:
    """The connector resumes from an offset at the first event of a bulk transaction's shared
    LSN, where Debezium 3.7.0 skips the rest: only `run`'s seam repair brings those rows."""
    if ctx.workload is None or ctx.connector is None:
        raise ValueError("resume-at-first-event needs the round's workload and its connector")
    with ctx.workload.paused():  # a change committed while the connector stops would be lost
        resumed = resume_at_first_event(ctx.settings, ctx.connector, ctx.workload.bulk)
    return resumed.describe()


def kill_connect_events(ctx: FaultContext) -> str:
    """SIGKILL Connect while inserts stream to an event table: what Debezium sends again must be
    appended once."""
    if ctx.events is None:
        raise ValueError("kill-connect-events needs an event table to insert into")
    killed = kill_connect_under_events(ctx.settings, ctx.events)
    ctx.landed["kill-connect-events"] += killed.redelivered > 0
    return killed.describe()


def restart_kafka(ctx: FaultContext) -> str:
    _bounce(ctx, "kafka")
    return "Kafka broker: stopped, then started again (Connect and the pipeline kept running)"


def restart_postgres(ctx: FaultContext) -> str:
    _bounce(ctx, "postgres")
    return "Postgres: fast shutdown, then started again (the workload reconnected)"


def stop_opensearch(ctx: FaultContext) -> str:
    away = ctx.rng.uniform(*ctx.outage_s)
    _stop(ctx, "opensearch", None)
    time.sleep(away)  # the outage itself: nothing to wait for, it is the fault
    manager.up(ctx.settings, ["opensearch"], progress=_quiet)
    return f"OpenSearch: stopped for {away:.0f} s, then started again"


def drop_slot(ctx: FaultContext) -> str:
    """The connector's replication slot dropped while the workload writes (as someone freeing
    the disk a slot holds does: the connector stopped for it), then the connector resumed:
    the running pipeline must notice and re-sync by itself; healed once it has."""
    if ctx.connector is None:
        raise ValueError("drop-slot needs the round's connector")
    api = ConnectApi(ctx.settings.connect_url)
    config = api.connector_config(ctx.connector) or {}
    slot = config.get("slot.name", "")
    stop_connector(api, ctx.connector, 60.0, "the slot was not dropped")
    drop_replication_slot(source_of(ctx.settings, config), slot)
    gap = ctx.rng.uniform(*ctx.outage_s)
    time.sleep(gap)  # the gap itself: the workload's changes meanwhile have no slot
    run_dir, connector = ctx.settings.run_dir, ctx.connector
    # Not once the run has begun re-syncing (it may, while the gap lasts): a resume between its
    # stop and its moving of the offset would start the connector from the lost position.
    if connector not in pending(run_dir):
        api.put(f"/connectors/{quote(ctx.connector)}/resume", None)
    if not wait_until(lambda: connector in pending(run_dir), 180.0, interval_s=1.0):
        raise ChangelakeError(f"the pipeline did not begin re-syncing {connector} in 180 s")
    began = time.monotonic()
    if not wait_until(lambda: connector not in pending(run_dir), RESYNC_WAIT_S, interval_s=2.0):
        raise ChangelakeError(f"the pipeline did not re-sync {connector} in {RESYNC_WAIT_S:.0f} s")
    return (
        f"replication slot {slot} dropped for {gap:.0f} s of the workload, then {connector}"
        f" resumed; the pipeline re-synced it by itself in {time.monotonic() - began:.0f} s"
    )


def _bounce(ctx: FaultContext, name: str, sig: int | None = None) -> None:
    _stop(ctx, name, sig)
    manager.up(ctx.settings, [name], progress=_quiet)
    if name == "connect":  # healed once capture runs again, not when the REST API answers
        connectors.wait_all_running(ctx.settings)


def _stop(ctx: FaultContext, name: str, sig: int | None) -> None:
    (svc,) = manager.services(ctx.settings, [name])
    process.stop(svc.pidfile, sig or svc.stop_signal, 0 if sig else svc.stop_grace_s)


def _quiet(_line: str) -> None:
    pass


FAULTS: dict[str, Callable[[FaultContext], str]] = {
    "kill-pipeline": kill_pipeline,
    "restart-connect": restart_connect,
    "stop-connect-in-bulk": stop_connect_in_bulk,
    "resume-at-first-event": resume_first_event,
    "kill-connect-events": kill_connect_events,
    "restart-kafka": restart_kafka,
    "restart-postgres": restart_postgres,
    "stop-opensearch": stop_opensearch,
    "drop-slot": drop_slot,
}
