"""The bench's two connectors on one database, each measured while it works alone.

changelake's connector (LeanJsonConverter) feeds changelake; the baseline's (the stock
JsonConverter, schemas inline, as the users the baseline stands for run it) feeds the baseline.
Debezium's snapshot and its streaming catch-up are timed for each, one connector at a time, with
Connect's CPU seconds; then the records' sizes (see `records`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from changelake.bench import records, resources, source, stages
from changelake.capture.connectors import apply as apply_connectors
from changelake.settings import Settings

Say = Callable[[str], None]
Wait = Callable[..., None]  # Bench._wait(ready, what, timeout_s, progress=…)


class ConnectorPair:
    def __init__(self, settings: Settings, out_dir: Path, figures: records.RecordFigures, say: Say):
        self.settings, self.out_dir, self.figures, self.say = settings, out_dir, figures, say
        self.names = {
            "lean": source.connector_name(out_dir.name),
            "stock": source.connector_name(out_dir.name, stock=True),
        }
        self.prefixes = {"lean": source.PREFIX, "stock": source.STOCK_PREFIX}
        self.slots = {"lean": source.SLOT, "stock": source.STOCK_SLOT}

    def _connect_pid(self) -> int | None:
        return resources.service_pids(self.settings).get("connect")

    def _records(self, kind: str) -> int:
        topics = source.topics(self.prefixes[kind])
        return stages.topic_records(self.settings.kafka_bootstrap, topics)

    def snapshot(self, kind: str, rows: int, wait: Wait) -> float:
        """Register the connector and time Debezium's snapshot of `rows` rows; rows/s."""
        stock = kind == "stock"
        # The baseline's file stays out of the folder `changelake run` reads its tables from.
        folder = self.out_dir / ("baseline-connector" if stock else "connectors")
        path = source.connector_file(self.settings, folder, self.names[kind], stock)
        with resources.timed(self._connect_pid()) as spent:
            apply_connectors(self.settings, [path], progress=self.say)
            wait(
                lambda: self._records(kind) >= rows,
                f"Debezium's snapshot ({records.CONVERTERS[kind]})",
                3600,
                progress=lambda: f"{self._records(kind):,} of {rows:,} rows in the topics",
            )
        rate = stages.Rate(rows, spent.seconds)
        self.say(
            f"bench: Debezium snapshot, {records.CONVERTERS[kind]}: {rate.changes:,} rows in"
            f" {rate.seconds:.0f} s ({rate.per_s:,.0f}/s), Connect CPU {spent.cpu_s:.0f} s"
        )
        figures = self.figures.setdefault(kind, {})
        figures["snapshot_rows_per_s"] = rate.per_s
        figures["snapshot_connect_cpu_s"] = spent.cpu_s
        return rate.per_s

    def stock_from_now(self) -> None:
        """A stock-converter connector again, for the baseline's sustained load, streaming from
        now on without a snapshot (the first one's slot was dropped with it: its backlog would
        be the baseline's first step)."""
        folder = self.out_dir / "baseline-connector"
        name = self.names["stock"] = source.connector_name(f"{self.out_dir.name}-s", stock=True)
        path = source.connector_file(
            self.settings, folder, name, stock=True, overrides={"snapshot.mode": "no_data"}
        )
        apply_connectors(self.settings, [path], progress=self.say)

    def alone(self, kind: str, dsn: str, changes: int) -> stages.Rate:
        """Resume the paused connector alone on the load's WAL (`changes` row changes): its rate
        and Connect's CPU."""
        with resources.timed(self._connect_pid()) as spent:
            caught = stages.caught_up_alone(
                self.settings,
                self.names[kind],
                self.prefixes[kind],
                dsn,
                self.slots[kind],
                self.say,
            )
        self.say(
            f"  debezium, {records.CONVERTERS[kind]}: {caught.changes:,} records in"
            f" {caught.seconds:.1f} s, Connect CPU {spent.cpu_s:.1f} s"
        )
        # Its records include a tombstone per delete: rate it by the row changes it carried.
        rate = stages.Rate(changes, caught.seconds)
        figures = self.figures.setdefault(kind, {})
        figures["changes_per_s"] = rate.per_s
        if changes:
            figures["connect_cpu_s_per_1k"] = 1000 * spent.cpu_s / changes
        return rate

    def measure_sizes(self) -> None:
        for kind, prefix in self.prefixes.items():
            topics = dict(zip(source.TABLES, source.topics(prefix), strict=True))
            sizes = records.sizes(self.settings.kafka_bootstrap, topics)
            self.figures.setdefault(kind, {})["bytes_per_record"] = sizes
