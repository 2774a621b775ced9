"""What a run was asked to do. Free of Spark, so the CLI shows these defaults in `--help`
without starting a JVM or importing pyspark."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RunOptions:
    once: bool = False
    resnapshot: tuple[str, ...] = ()
    trigger_seconds: float = 1.0  # the micro-batch interval (a longer batch is followed at once)
    # How long a streaming run rests between rounds that bring its aggregate views up to date (a
    # round costs seconds of both cores on a small machine, whatever few changes it takes).
    views_seconds: float = 30.0
    max_records_per_batch: int = 50_000  # a micro-batch reads at most this times its tables
    # The share of one core's time a streaming run spends comparing the lake with its source in
    # the background (and re-sending what differs); 0: never.
    verify_share: float = 0.1
    ui: bool = False  # Spark's web UI (jobs, stages, streaming queries), on loopback
    metrics_port: int | None = None  # a streaming run's Prometheus metrics; None: the setting's


DEFAULTS = RunOptions()
