"""A streaming run's Prometheus metrics (`run --metrics-port`), read from the run's own state at
each scrape: per table its state, batches, changes, dead letters, applied LSN, last batch's time
and freshness; per connector its tasks' states, and
per replication slot the WAL Postgres keeps for it. Nothing is counted twice: the figures are the
ones the run's log lines and `status` give.

A service that does not answer leaves its metrics out of that scrape (and counts a scrape
error); the run never fails for its metrics.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any

import psycopg
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from changelake.apply.pipeline_file import TableState, shown_state
from changelake.apply.run_state import TableJob
from changelake.capture.capture_health import Stall
from changelake.capture.slot_status import SLOT_SQL
from changelake.capture.source import Source

# Each table's state as a 0/1 series per state; a run stopping says so in its log, not here.
GAUGED_STATES = [s for s in TableState if s is not TableState.STOPPED_BY_REQUEST]


class RunMetrics(Collector):
    """`connectors`: Connect's report of each connector and its tasks (`connectors status`);
    `slots`: each replication slot the run's tables are read through, and its database;
    `stalled`: per table whose connector captures nothing, why (shown as its state, and per
    connector with its cause)."""

    def __init__(
        self,
        jobs: Mapping[str, TableJob],
        connectors: Callable[[], Mapping[str, Any]],
        slots: Callable[[], Mapping[str, Source]],
        stalled: Callable[[], Mapping[str, Stall]] = dict,
    ):
        self.jobs, self.connectors, self.slots = jobs, connectors, slots
        self.stalled = stalled
        self.scrape_errors = 0

    def collect(self) -> Iterable[Metric]:
        yield from self._tables(dict(self.jobs))
        yield from self._connectors()
        yield self._stalls()
        yield from self._slots()
        errors = CounterMetricFamily(
            "changelake_metrics_scrape_errors", "Services a scrape could not reach"
        )
        errors.add_metric([], self.scrape_errors)
        yield errors

    def _tables(self, jobs: dict[str, TableJob]) -> Iterable[Metric]:
        table = ["table"]
        state = GaugeMetricFamily(
            "changelake_table_state", "1 for the state the table is in", labels=["table", "state"]
        )
        batches = CounterMetricFamily("changelake_table_batches", "Batches applied", labels=table)
        changes = CounterMetricFamily("changelake_table_changes", "Changes applied", labels=table)
        dead = CounterMetricFamily(
            "changelake_table_dead_letters", "Records written to _errors", labels=table
        )
        lsn = GaugeMetricFamily(
            "changelake_table_applied_lsn", "The highest source LSN applied", labels=table
        )
        batch_s = GaugeMetricFamily(
            "changelake_table_last_batch_seconds", "How long the last batch took", labels=table
        )
        fresh = GaugeMetricFamily(
            "changelake_table_freshness_seconds",
            "How old the last batch's newest change was when its commit made it readable",
            labels=table,
        )
        stalled = self.stalled()
        for name, job in sorted(jobs.items()):
            shown = shown_state(job, stalled.get(name))["state"]
            for each in GAUGED_STATES:
                state.add_metric([name, each], 1.0 if shown == each else 0.0)
            batches.add_metric([name], job.batches)
            changes.add_metric([name], job.changes)
            dead.add_metric([name], job.errors)
            lsn.add_metric([name], job.applied_lsn)
            if job.stats:
                batch_s.add_metric([name], float(job.stats.get("seconds", 0.0)))
                newest = job.stats.get("max_source_ts")
                if newest and job.counted_at:
                    committed = datetime.fromisoformat(str(newest)).timestamp()
                    fresh.add_metric([name], max(0.0, job.counted_at - committed))
        yield from (state, batches, changes, dead, lsn, batch_s, fresh)

    def _connectors(self) -> Iterable[Metric]:
        tasks = GaugeMetricFamily(
            "changelake_connector_task_state",
            "1 for the state each connector task is in (Kafka Connect)",
            labels=["connector", "task", "state"],
        )
        try:
            report = self.connectors()
        except Exception:  # Connect down: no figures this scrape
            self.scrape_errors += 1
            return
        for name, item in report.items():
            for task in item["tasks"]:
                tasks.add_metric([name, str(task["id"]), str(task["state"])], 1.0)
        yield tasks

    def _stalls(self) -> Metric:
        stalled = GaugeMetricFamily(
            "changelake_capture_stalled",
            "1 per connector that captures nothing, with why: connector (not running),"
            " heartbeat, slot_missing, slot_invalidated, slot_recreated, failover,"
            " source_replaced, source_behind_lake, resync (the run re-syncs it)",
            labels=["connector", "cause"],
        )
        for stall in {s.connector: s for s in self.stalled().values()}.values():
            stalled.add_metric([stall.connector, stall.cause], 1.0)
        return stalled

    def _slots(self) -> Iterable[Metric]:
        lag = GaugeMetricFamily(
            "changelake_slot_lag_bytes",
            "WAL Postgres keeps for the replication slot (not yet confirmed by Debezium)",
            labels=["slot"],
        )
        for slot, source in self.slots().items():
            try:
                with psycopg.connect(source.dsn(), connect_timeout=3, autocommit=True) as conn:
                    row = conn.execute(SLOT_SQL, (slot,)).fetchone()
            except Exception:  # Postgres down, or the slot's credentials refused
                self.scrape_errors += 1
                continue
            if row is not None and row[0] is not None:
                lag.add_metric([slot], float(row[0]))
        yield lag
