"""The five kinds of fault, each injected and then healed before the next one.

Every fault is something that happens to real deployments: the pipeline host dies, Connect
is redeployed or crashes, the broker restarts, Postgres restarts, the search cluster is away
for a while. A fault returns a line saying exactly what was done.
"""

from __future__ import annotations

import random
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass

from pipelines.chaos.pipeline_process import PipelineProcess
from pipelines.settings import Settings
from pipelines.stack import manager, process

KINDS = (
    "kill-pipeline",
    "restart-connect",
    "restart-kafka",
    "restart-postgres",
    "stop-opensearch",
)


@dataclass
class FaultContext:
    settings: Settings
    pipeline: PipelineProcess
    rng: random.Random
    say: Callable[[str], None]
    outage_s: tuple[float, float] = (5.0, 20.0)  # how long OpenSearch stays away


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


def _bounce(ctx: FaultContext, name: str, sig: int | None = None) -> None:
    _stop(ctx, name, sig)
    manager.up(ctx.settings, [name], progress=_quiet)


def _stop(ctx: FaultContext, name: str, sig: int | None) -> None:
    (svc,) = manager.services(ctx.settings, [name])
    process.stop(svc.pidfile, sig or svc.stop_signal, 0 if sig else svc.stop_grace_s)


def _quiet(_line: str) -> None:
    pass


FAULTS: dict[str, Callable[[FaultContext], str]] = {
    "kill-pipeline": kill_pipeline,
    "restart-connect": restart_connect,
    "restart-kafka": restart_kafka,
    "restart-postgres": restart_postgres,
    "stop-opensearch": stop_opensearch,
}
