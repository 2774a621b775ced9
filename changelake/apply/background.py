"""The work a run does beside its streams: rounds of the aggregate views (views.json),
verification of the lake against the source (repairing what differs), the base tables' small
files packed (upkeep), and its Prometheus metrics. A streaming run keeps each on threads of its
own; a `--once` run packs its tables and brings the views up to date on its own thread as it
ends, and serves no metrics and verifies nothing."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from pyspark.sql import SparkSession

from changelake import run_log
from changelake.apply import endpoint, metrics
from changelake.apply.pipeline_file import TableState
from changelake.apply.run_options import RunOptions
from changelake.apply.run_state import TableJob
from changelake.apply.streaming_failure import cause
from changelake.apply.upkeep import Upkeep
from changelake.capture import connector_status
from changelake.capture.capture_health import Stall
from changelake.settings import Settings
from changelake.tables import TableRef, slot_sources
from changelake.verify.continuous import ContinuousVerifier
from changelake.views.derived import DerivedView, derived_views
from changelake.views.maintenance import ViewMaintainer

if TYPE_CHECKING:
    from changelake.serve.served import ServedViews

GRACE_S = 30.0  # how long a stopping run lets a running view round finish


class Background:
    def __init__(
        self,
        spark: SparkSession,
        settings: Settings,
        options: RunOptions,
        refs: Callable[[], list[TableRef]],
        out: Callable[[str], None],
        jobs: Mapping[str, TableJob],
        stalled: Callable[[], Mapping[str, Stall]] = dict,
    ):
        port = settings.metrics_port if options.metrics_port is None else options.metrics_port
        self.metrics_port, self.out = port, out
        self.metrics_server: Any = None  # serving, while a streaming run lasts
        # The views the run serves queries (serve/served.py), when it does: the endpoint
        # answers a query that cannot read served.json with them.
        self.served: ServedViews | None = None
        self.collector = metrics.RunMetrics(
            jobs,
            lambda: connector_status.status(settings),
            lambda: slot_sources(settings, refs()),
            stalled,
        )
        self.settings = settings

        def aggregates() -> list[DerivedView]:
            return [v for v in derived_views(settings, refs()) if v.stored_at]

        self.views = ViewMaintainer(spark, aggregates, options.views_seconds, out)

        def streaming() -> list[TableRef]:  # compared only while their stream applies them
            return [j.ref for j in list(jobs.values()) if j.state == TableState.RUNNING]

        def applied(table: str) -> dict[str, int]:
            job = jobs.get(table)
            return dict(job.offsets) if job is not None else {}

        self.verifier = ContinuousVerifier(
            spark,
            settings,
            options.verify_share,
            streaming,
            applied,
            out,
        )
        self.upkeep = Upkeep(spark, settings.lake, streaming, out)

    def start(self) -> None:
        self.views.start()
        self.verifier.start()
        self.upkeep.start()
        if self.metrics_port:
            self.metrics_server = endpoint.serve(
                self.settings, self.metrics_port, self.collector, lambda: self.served, self.out
            )

    def stop(self) -> None:
        if self.metrics_server is not None:
            self.metrics_server.shutdown()
            self.metrics_server.server_close()  # the port, free for the next run at once
        self.verifier.stop(wait_s=0)  # it only reads (and asks for re-sends): nothing to finish
        self.views.stop(wait_s=GRACE_S)
        self.upkeep.stop(wait_s=0)  # an OPTIMIZE cut short commits nothing

    def finish(self, refs: Iterable[TableRef]) -> None:
        """As a `--once` run ends: the tables it applied packed if due (a run every minute
        from cron adds their small files as a streaming run does), then every aggregate view
        brought up to date."""
        for ref in refs:
            try:
                self.upkeep.pack_if_due(ref)
            except Exception as exc:  # the next run tries again; the changes are in
                self.out(run_log.warning(f"{ref.name}: upkeep skipped: {cause(str(exc))}"))
        self.views.run_all()
