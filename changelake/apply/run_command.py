"""`changelake run` as a command: check the services it needs, wait for capture under --once,
open the Spark session, run the pipeline until it ends or a signal stops it; under --once, then
wait for the rows its batches asked Debezium to re-send and apply them in another pass, so that a
run that ends leaves nothing it started half done."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from changelake import kafka_io, lakefs, run_log
from changelake.apply.resync import resync_once
from changelake.apply.run import Discover, Out, Pipeline
from changelake.apply.run_options import RunOptions
from changelake.capture.capture_restarts import CaptureRestarts
from changelake.capture.caught_up import wait_caught_up
from changelake.capture.resend import settle
from changelake.capture.seams import SeamRepair
from changelake.search.client import SearchClient
from changelake.settings import Settings
from changelake.tables import TableRef, slot_sources, source_of_table

# How long `run --once` waits for Debezium to re-send the rows it asked for (a seam's, a column
# added with a DEFAULT's): the rows are part of "every change committed before this command".
RESEND_TIMEOUT_S = 600.0
MOST_PASSES = 3  # a pass applying re-sent rows asks for none again; this bounds it regardless


@contextmanager
def stop_on_signals(pipeline: Pipeline) -> Iterator[None]:
    """SIGINT and SIGTERM stop the pipeline between batches; the caller's handlers come back
    when it ends (a caller running it in-process keeps its own Ctrl-C)."""

    def request_stop(signum: int, _frame: Any) -> None:
        if not pipeline.stopping:
            pipeline.out(f"{signal.Signals(signum).name}: stopping when the batch in flight ends")
        pipeline.stopping = True

    before = {s: signal.signal(s, request_stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)


def run(
    settings: Settings,
    refs: list[TableRef],
    options: RunOptions,
    out: Out = run_log.say,
    discover: Discover | None = None,
) -> int:
    from changelake.serve.served import port_for, server_conf, serving
    from changelake.spark import owned_session

    run_log.configure()
    kafka_io.list_topics(settings.kafka_bootstrap)  # fail fast, naming Kafka, if it is down
    if any(r.search for r in refs):  # and OpenSearch, if an index is configured
        SearchClient.of(settings, retry_for_s=0).request("GET", "/")
    beats: dict[str, str] = {}  # per connector, its heartbeat query: moves a quiet one on
    if options.once:  # "everything available" = every change committed before this command
        sources = {r.connector: source_of_table(settings, r) for r in refs}
        beats = {c: s.heartbeat_query for c, s in sources.items()}
        CaptureRestarts(settings.connect_url, out).tick(r.connector for r in refs)  # if FAILED
        resync_once(settings, refs, out)  # a slot that lost changes: capture again, re-sent
        seams = SeamRepair(settings, out, lambda ref: sources[ref.connector].dsn())
        settle(settings.kafka_bootstrap, seams.tick(refs), RESEND_TIMEOUT_S, out, beats)
        for slot, source in slot_sources(settings, refs).items():
            wait_caught_up(source, slot, say=out)
    # Queries served while it runs.
    serve = None if options.once else server_conf(settings, port_for(settings))
    with owned_session(settings, ui=options.ui, conf=serve) as spark:
        lakefs.ensure_writable(spark, settings.lake, "lake")
        lakefs.ensure_writable(spark, settings.checkpoints, "checkpoints")
        pipeline = Pipeline(spark, settings, refs, options, out, discover)
        out(f"changelake run: {len(refs)} tables → {settings.lake} (Spark {settings.spark_master})")
        if options.ui:
            out(f"Spark UI at {spark.sparkContext.uiWebUrl}")
        with serving(spark, settings, lambda: [j.ref for j in pipeline.jobs.values()]) as served:
            if served is not None:
                where = f"{settings.spark_connect_bind}:{served.port}"
                out(f"serving queries on Spark Connect at sc://{where}")
            pipeline.background.served = served
            with stop_on_signals(pipeline):
                code = pipeline.run()
            for _ in range(MOST_PASSES - 1):
                if not options.once or pipeline.stopping or not pipeline.resends:
                    break
                # The rows its batches asked Debezium to re-send arrive after the pass ended.
                out(f"waiting (up to {RESEND_TIMEOUT_S:.0f}s) for the rows this run asked for")
                settle(settings.kafka_bootstrap, pipeline.resends, RESEND_TIMEOUT_S, out, beats)
                again = replace(options, resnapshot=())  # the first pass made them anew
                pipeline = Pipeline(spark, settings, refs, again, out, discover)
                with stop_on_signals(pipeline):
                    code = max(code, pipeline.run())  # a table stopped in either pass
            return code
